"""A Python-backend step as the stub will run it: the ``model.py`` of each version Triton loads, read once
(bounded, never imported), its imports, and the environment it runs in.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from repo_builder.triton_layout import MAX_PYTHON_BYTES
from repo_builder.validate.analysis.files import UnsafeFile, read_bounded
from repo_builder.validate.analysis.memo import model_fact
from repo_builder.validate.analysis.python_imports import PythonImports, python_imports
from repo_builder.validate.analysis.resolve import judged, resolve_backend
from repo_builder.validate.analysis.versions import entry_key, version_folder, versions_to_load
from repo_builder.validate.records import FileEntry, ModelEntry, RuleContext, VersionDir

T = TypeVar("T")
EXECUTION_ENV_PATH = "EXECUTION_ENV_PATH"  # python_backend python_be.cc: the step's own packed environment


@dataclass(frozen=True)
class StepVersion:
    """One loaded version of a Python step whose ``model.py`` was read (``imports.problem``: not parsed,
    RB407 reports why)."""

    number: int
    folder: VersionDir
    path: Path  # the model.py
    imports: PythonImports


def execution_env_path(model: ModelEntry) -> str | None:
    """The ``EXECUTION_ENV_PATH`` parameter as written (None when absent; an empty value means none)."""
    if model.config is None or EXECUTION_ENV_PATH not in model.config.parameters:
        return None
    return model.config.parameters[EXECUTION_ENV_PATH].string_value


def is_python_step(model: ModelEntry, ctx: RuleContext) -> bool:
    """A model the Python backend runs (``backend: "python"``, or a ``model.py`` it resolves to)."""
    return judged(model, ctx) and not model.is_ensemble and resolve_backend(model).backend == "python"


def read_step_source(path: Path, model: ModelEntry, ctx: RuleContext) -> bytes:
    """The bytes of a step's source file (bounded, inside the repository; ``UnsafeFile`` otherwise). The last
    file read is kept for the run: RB407 and RB421 read each ``model.py`` once between them, and no more than
    one file is held whatever the repository's size."""
    last = ctx.facts.get(read_step_source)
    if last is not None and last[0] == path:
        return cast(bytes, last[1])
    source = read_bounded(path, model.path.parent, MAX_PYTHON_BYTES)
    ctx.facts[read_step_source] = (path, source)
    return source


# What each step source gave (its problems, its imports: small values, never the text), by what it is,
# its path and the scan's size and modification time: in a long-lived process (an editor, a watch loop) an
# unchanged model.py is not read again. A file that could not be read is never kept.
_DERIVED: dict[tuple[Hashable, tuple[str, int, int]], Any] = {}
_MAX_DERIVED = 4096


def listed_step_source_fact(
    folder: VersionDir, name: str, entry: FileEntry, model: ModelEntry, ctx: RuleContext, what: Hashable, derive: Callable[[bytes], T]
) -> T:
    """``derive(source)`` of the step source ``name`` that the scan listed in ``folder`` (``entry``; read with
    ``read_step_source``, which raises ``UnsafeFile``), kept while the file is unchanged; its path is joined
    only when the file must be read. A listed name is one plain name (no ``/``, never ``.``) and a version
    folder is the model folder's subfolder ``folder.name``, so the text below is ``str(folder.path / name)``
    without the pathlib join or formatting a Path, the kept value's key unchanged."""
    text = f"{model.path_text}/{folder.name}/{name}"
    return _kept(entry_key(text, entry), lambda: folder.path / name, model, ctx, what, derive)


def _kept(
    key: tuple[str, int, int] | None, path: Callable[[], Path], model: ModelEntry, ctx: RuleContext, what: Hashable,
    derive: Callable[[bytes], T],
) -> T:
    if key is not None:
        hit = _DERIVED.get((what, key))
        if hit is not None:
            return cast(T, hit)
    value = derive(read_step_source(path(), model, ctx))
    if key is not None:
        if len(_DERIVED) >= _MAX_DERIVED:
            _DERIVED.clear()
        _DERIVED[(what, key)] = value
    return value


def _read(model: ModelEntry, ctx: RuleContext) -> tuple[StepVersion, ...]:
    resolved = resolve_backend(model)
    name = resolved.default_model_filename or "model.py"
    steps = []
    for number in versions_to_load(model):
        v = version_folder(model, number)
        entry = v.entry(name) if v is not None else None
        if v is None or entry is None or entry.is_dir or entry.escapes or entry.size is None or entry.size > MAX_PYTHON_BYTES:
            continue  # RB405 / RB407 / RB103 report these
        try:
            imports = listed_step_source_fact(v, name, entry, model, ctx, (python_imports, name), lambda s: python_imports(s, name))
        except UnsafeFile:
            continue  # RB407 reports it
        steps.append(StepVersion(number, v, v.path / name, imports))
    return tuple(steps)


def python_step_versions(model: ModelEntry, ctx: RuleContext) -> tuple[StepVersion, ...]:
    """The loaded versions of a Python step with their parsed ``model.py`` (empty for other models)."""
    if not is_python_step(model, ctx):
        return ()
    return model_fact(model, python_step_versions, lambda m: _read(m, ctx))
