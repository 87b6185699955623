"""Every ONNX finding of one model (RB6xx share it): the graph of each loaded version against the config.

The ONNX file and its external data must stay inside the model folder: onnxruntime and
``onnx.checker`` refuse external data paths that are absolute or climb out of the model's folder, and
offline validate never follows a path out of the repository (docs/security.md).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import NamedTuple, cast

from repo_builder.onnx_io import OnnxReadError, OnnxSignature, read_onnx_signature
from repo_builder.validate.analysis.files import resolves_inside
from repo_builder.validate.analysis.onnx_compare import OnnxProblem, compare_onnx
from repo_builder.validate.analysis.resolve import resolve_backend
from repo_builder.validate.analysis.versions import (
    content_key,
    link_free,
    listed_file,
    version_folder,
    versions_to_load,
)
from repo_builder.validate.records import ModelEntry, RuleContext, Severity


class OnnxChecked(NamedTuple):
    version: int
    path: Path
    problems: tuple[OnnxProblem, ...]


def onnx_file(model: ModelEntry, number: int, filename: str) -> Path | None:
    """The graph file of version ``number`` (``<file>`` or ``<folder>/model.onnx``), None when absent."""
    v = version_folder(model, number)
    entry = v.entry(filename) if v is not None else None
    if v is None or entry is None or entry.escapes:
        return None  # RB405 reports the missing file, RB103 the escaping link
    path = v.path / filename
    if entry.is_dir:
        path = path / "model.onnx"
        if not resolves_inside(path, model.path) or not path.is_file():
            return None
    elif entry.size is None:
        return None
    return path


def not_downloaded(model: ModelEntry, number: int, filename: str, path: Path) -> int | None:
    """Size of a remote file that was listed but not fetched (a zero-byte placeholder), else None."""
    v = version_folder(model, number)
    entry = v.entry(filename) if v is not None else None
    if entry is None or entry.is_dir or not entry.size or entry.mtime_ns is not None:
        return None  # a stat of the file itself gave the size (remote.py drops it for a listed size)
    try:
        return entry.size if path.stat().st_size != entry.size else None
    except OSError:
        return None


def external_data_problems(sig: OnnxSignature, path: Path, model_dir: Path, filename: str) -> Iterator[OnnxProblem]:
    """External data named by the graph: relative, inside the model folder, present."""
    for location in sig.external_files:
        target = path.parent / location
        if PurePath(location).is_absolute() or not resolves_inside(target, model_dir):
            yield OnnxProblem(
                "RB601",
                f"{filename} names external data '{location}' outside the model folder; onnxruntime and "
                "onnx.checker refuse external data paths that are absolute or leave the model's folder",
                f"keep the weights file beside {filename} and save it with a relative location",
            )
        elif not target.is_file():
            yield OnnxProblem(
                "RB601",
                f"{filename} keeps weights in external data file '{location}', which is missing",
                f"put '{location}' beside {filename} (save the model as a model.onnx/ folder)",
            )


# Graphs read in this process, by path and the scan's size and modification time: an unchanged file is not
# opened again (the guarded open walks every path component). Only readable graphs are kept.
_SIGNATURES: dict[tuple[str, int, int], OnnxSignature] = {}
_MAX_SIGNATURES = 4096


def read_version_signature(path: Path, model: ModelEntry, filename: str) -> OnnxSignature | OnnxProblem:
    """The graph's IO, or the RB601 problem that keeps it from being read."""
    listed = listed_file(model, path)
    # A file the scan listed with no link on the way is inside the model folder: no lstat of each part.
    if (listed is None or not listed.plain) and not resolves_inside(path, model.path):
        return OnnxProblem("RB601", f"{filename} leaves the model folder; not read", "copy the file into the model folder")
    key = content_key(model, path, listed)
    hit = _SIGNATURES.get(key) if key is not None else None
    return hit if hit is not None else _read(path, model, filename, key)


def _read(path: Path, model: ModelEntry, filename: str, key: tuple[str, int, int] | None) -> OnnxSignature | OnnxProblem:
    """Read the graph and keep it under ``key`` (None: not kept)."""
    try:
        sig = read_onnx_signature(path, model.path)
    except OnnxReadError as exc:
        return OnnxProblem("RB601", f"cannot load {filename}: {exc}", "re-export the model; the file is damaged or not ONNX")
    if key is not None:
        if len(_SIGNATURES) >= _MAX_SIGNATURES:
            _SIGNATURES.clear()
        _SIGNATURES[key] = sig
    return sig


def onnx_filename(model: ModelEntry, ctx: RuleContext) -> str | None:
    """The ONNX file name when the model runs on ONNX Runtime and is judged, else None."""
    if model.problem is not None or (model.config is None and (model.has_config_file or ctx.options.strict)):
        return None
    resolved = resolve_backend(model)
    if resolved.backend != "onnxruntime" or resolved.problem is not None:
        return None
    return resolved.default_model_filename or "model.onnx"


def check_onnx_model(model: ModelEntry, ctx: RuleContext) -> tuple[OnnxChecked, ...]:
    """All ONNX findings of one model, computed once and shared by the RB6xx rules."""
    # model_fact inlined, keys made once: seven rules ask for every ONNX model, and the call, closure and
    # key were a fifth of it. ``strict`` is the only part of the run the answer depends on.
    key = _CHECK_KEYS[1 if ctx.options.strict else 0]
    facts = model.facts
    found = facts.get(key)
    if found is None:
        found = facts[key] = _check(model, ctx)
    return found


_CHECK_KEYS = ((check_onnx_model, False), (check_onnx_model, True))


class VersionGraph(NamedTuple):
    """Version ``number``'s graph file, as read once per model for every ONNX check and auto-complete."""

    text: str  # the file's path
    graph: OnnxSignature | OnnxProblem  # its inputs and outputs, or the RB601 problem (INFO: not downloaded)


def version_graph(model: ModelEntry, number: int, filename: str) -> VersionGraph | None:
    """The graph of version ``number`` (``onnx_file``, ``not_downloaded``, ``read_version_signature``
    in one, kept on the model), None when the file is absent."""
    key = (version_graph, number, filename)
    facts = model.facts
    found = facts.get(key, facts)  # the facts themselves mark "not looked at yet": None is an answer
    if found is facts:
        graph = facts[key] = _version_graph(model, number, filename)
        return graph
    return cast("VersionGraph | None", found)


def _version_graph(model: ModelEntry, number: int, filename: str) -> VersionGraph | None:
    v = version_folder(model, number)
    entry = v.entry(filename) if v is not None else None
    if v is None or entry is None or entry.escapes:
        return None  # RB405 reports the missing file, RB103 the escaping link
    size, mtime = entry.size, entry.mtime_ns
    if entry.is_dir or size is None or mtime is None:
        return _general_graph(model, number, filename)  # a model.onnx/ folder, a remote listing, no stat
    # A file the scan listed and stat'ed directly in the version folder: what onnx_file, not_downloaded,
    # listed_file and content_key derive, from the entries at hand, in strings (a Path only to read).
    # A version folder is the model folder's subfolder ``v.name`` and a listed name is one component, so
    # this is str(v.path / filename), without the Path and the first str() of a Path (1.5 us: uncached).
    text = model.path_text + os.sep + v.name + os.sep + filename
    if not link_free(model, v.name, entry) and not resolves_inside(Path(text), model.path):
        problem = OnnxProblem("RB601", f"{filename} leaves the model folder; not read", "copy the file into the model folder")
        return VersionGraph(text, problem)
    key = (text, size, mtime)
    hit = _SIGNATURES.get(key)
    return VersionGraph(text, hit if hit is not None else _read(Path(text), model, filename, key))


def _general_graph(model: ModelEntry, number: int, filename: str) -> VersionGraph | None:
    path = onnx_file(model, number, filename)
    if path is None:
        return None
    size = not_downloaded(model, number, filename, path)
    if size is not None:
        problem = OnnxProblem(
            "RB601",
            f"needs the model file: {filename} ({size} bytes) was not downloaded, so its inputs and outputs are not checked",
            "raise --max-download or validate a local copy",
            Severity.INFO,
        )
        return VersionGraph(str(path), problem)
    return VersionGraph(str(path), read_version_signature(path, model, filename))


def _check_version(model: ModelEntry, ctx: RuleContext, number: int, filename: str) -> OnnxChecked | None:
    found = version_graph(model, number, filename)
    if found is None:
        return None
    sig = found.graph
    if isinstance(sig, OnnxProblem):
        return OnnxChecked(number, Path(found.text), (sig,))
    # The path is built only for a finding (most models have none).
    problems = list(external_data_problems(sig, Path(found.text), model.path, filename)) if sig.external_files else []
    if model.config is not None:
        problems.extend(compare_onnx(model.name, model.config, sig, ctx.options.strict))
    return OnnxChecked(number, Path(found.text), tuple(problems)) if problems else None


def _check(model: ModelEntry, ctx: RuleContext) -> tuple[OnnxChecked, ...]:
    filename = onnx_filename(model, ctx)
    if filename is None:
        return ()
    found = []
    for number in versions_to_load(model):
        checked = _check_version(model, ctx, number, filename)
        if checked is not None:
            found.append(checked)
    return tuple(found)
