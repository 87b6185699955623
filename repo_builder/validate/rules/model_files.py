"""Rules RB4xx (continued): the model file each backend loads from a version folder.

File names, fallbacks and which backends read a file come from analysis/backends.py (each entry cites
its backend's source).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from repo_builder.compile_recipe import RECIPE_FILE
from repo_builder.triton_layout import MAX_PYTHON_BYTES
from repo_builder.validate.analysis.files import UnsafeFile
from repo_builder.validate.analysis.python_source import PythonProblem, check_python_source
from repo_builder.validate.analysis.python_step import listed_step_source_fact
from repo_builder.validate.analysis.resolve import (
    FILE_BACKENDS,
    TF_SAVEDMODEL,
    ResolvedBackend,
    fil_model_file,
    judged,
    loaded_file_names,
    resolve_backend,
)
from repo_builder.validate.analysis.versions import version_folder, versions_to_load
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, VersionDir, rule

_CC_KEY = re.compile(r"^\d+\.\d+$")


def _missing(v: VersionDir, name: str, backend: str, platform: str, inner: str = "model.onnx") -> str | None:
    """Why ``name`` in version folder ``v`` cannot be the model file, or None when it can."""
    entry = v.entry(name)
    if entry is None:
        return "is missing"
    if entry.escapes:
        return "is a symlink that leaves the repository"
    if entry.size is None and not entry.is_dir:
        return "cannot be read (a broken symlink?)"
    if backend in ("onnxruntime", "fil"):
        # A folder is allowed: ONNX Runtime then reads <folder>/model.onnx (external data beside it),
        # FIL the file of its model_type inside it.
        if entry.is_dir and not (v.path / name / inner).is_file():
            return f"is a folder without {inner} inside"
        return None
    wants_dir = backend == "tensorflow" and platform == TF_SAVEDMODEL
    if wants_dir and not entry.is_dir:
        return "must be a folder (a TensorFlow SavedModel)"
    if not wants_dir and entry.is_dir:
        return "is a folder, not a file"
    return None


def _inner(model: ModelEntry, resolved: ResolvedBackend) -> str:
    """The file a backend reads inside a folder named as its model file (ONNX Runtime, FIL)."""
    return (fil_model_file(model) or "") if resolved.backend == "fil" else "model.onnx"


def _needs_file(model: ModelEntry, ctx: RuleContext) -> ResolvedBackend | None:
    if not judged(model, ctx) or model.is_ensemble:
        return None
    resolved = resolve_backend(model)
    if resolved.problem is not None or resolved.backend not in FILE_BACKENDS:
        return None
    return resolved


def _cc_filenames(model: ModelEntry) -> dict[str, str]:
    return dict(model.config.cc_model_filenames) if model.config is not None else {}


def _openvino_weights(model: ModelEntry, v: VersionDir, number: int, name: str, resolved: ResolvedBackend) -> Iterator[Finding]:
    weights = str(Path(name).with_suffix(".bin"))
    why_bin = _missing(v, weights, resolved.backend, resolved.platform)
    if why_bin is not None:
        yield Finding(
            f"version {number} of model '{model.name}': '{v.name}/{weights}' {why_bin} "
            f"(OpenVINO reads the weights beside {name})",
            path=v.path / weights,
            version=number,
            hint=f"put {weights} next to {name}",
        )


def _missing_file_finding(
    model: ModelEntry, v: VersionDir, number: int, names: tuple[str, ...], why: str, resolved: ResolvedBackend
) -> Finding:
    name = names[0]
    cc = _cc_filenames(model)
    hint = f"put {name} in {model.name}/{v.name}/"
    if len(names) > 1:
        hint += f" (the {resolved.backend} backend also loads {' or '.join(names[1:])} when {name} is absent)"
    if resolved.backend == "python":
        hint += "; without it Triton 2.51 does not fail but waits for the Python stub until the load times out"
    if cc:
        hint += f"; GPUs with compute capability {', '.join(sorted(cc))} use cc_model_filenames instead"
    return Finding(
        f"unable to find '{model.name}/{v.name}/{name}' for model '{model.name}': the file {why} "
        f"(backend '{resolved.backend}' loads it for version {number})",
        path=v.path / name,
        version=number,
        severity=Severity.WARNING if cc else None,
        hint=hint,
    )


@rule("RB405", "model-file-missing")
def check_model_file_missing(model: ModelEntry, ctx: RuleContext) -> list[Finding]:
    """A version that Triton loads lacks the file its backend reads.

    Defaults: ``model.plan`` (TensorRT), ``model.onnx`` (ONNX Runtime; a file, or a folder holding
    ``model.onnx`` and its external data), ``model.pt`` (PyTorch; with ``runtime: "model.py"`` its
    Python-based runtime loads ``model.py``, else ``model.pt``), ``model.pt2`` (torch_aoti),
    ``model.graphdef``, ``model.savedmodel/`` (TensorFlow), ``model.xml`` + ``model.bin`` (OpenVINO; another
    format named by ``default_model_filename``, such as ``model.onnx``, needs no ``.bin``),
    ``model.py`` (Python), ``model.dali`` (DALI, which loads ``dali.py`` when ``model.dali`` is
    absent: dali_backend ``fallback_model_filename_``), and for FIL the file of its ``model_type``
    parameter (``xgboost.model`` by default, ``xgboost.json``, ``xgboost.ubj``, ``model.txt`` for
    lightgbm, ``checkpoint.tl`` for treelite_checkpoint), ``model.json`` (vLLM's engine arguments);
    ``default_model_filename`` overrides the name.
    A Python model without ``model.py`` is worse than an error: Triton 2.51 waits on the stub until a
    timeout. When ``cc_model_filenames`` is set, a missing default file is a warning (GPUs whose
    compute capability is listed load their own file).

    Fails::

        models/add_sub/config.pbtxt   # backend: "python"
        models/add_sub/1/             # no model.py

    Passes::

        models/add_sub/1/model.py
        models/dali_pre/1/dali.py     # backend: "dali", no model.dali
    """
    # A list, not a generator: most models find nothing, and the generator was a fifth of the rule's cost.
    found: list[Finding] = []
    resolved = _needs_file(model, ctx)
    names = loaded_file_names(model, resolved) if resolved is not None else ()
    if resolved is None or not names:
        return found
    backend, platform = resolved.backend, resolved.platform
    inner = _inner(model, resolved)
    for number in versions_to_load(model):
        v = version_folder(model, number)
        if v is None:
            continue  # RB108 says why
        if backend == "tensorrt" and v.has(RECIPE_FILE):
            continue  # a plan still to be compiled: RB701 (tensorrt-plan-pending) reports it
        for name in names:
            if _missing(v, name, backend, platform, inner) is None:  # the first file the backend tries that is there
                if backend == "openvino" and name.endswith(".xml"):
                    # an IR model reads <stem>.bin; ONNX (or other formats OpenVINO reads) carries its weights
                    found.extend(_openvino_weights(model, v, number, name, resolved))
                break
        else:  # none is there
            why = cast(str, _missing(v, names[0], backend, platform, inner))
            found.append(_missing_file_finding(model, v, number, names, why, resolved))
    return found


@rule("RB406", "cc-model-filenames-invalid", field="cc_model_filenames", sections=("cc_model_filenames",))
def check_cc_model_filenames(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """``cc_model_filenames`` keys must be compute capabilities and their files must exist (non-TensorRT).

    On a GPU instance Triton looks up the GPU's compute capability as ``"<major>.<minor>"`` (e.g.
    ``"8.6"``) in ``cc_model_filenames`` and loads that file instead of ``default_model_filename``. A key
    such as ``"sm_86"`` or ``"86"`` never matches; a listed file that is missing fails the load on that
    GPU. TensorRT models are checked by RB706 (tensorrt-cc-model-filenames) instead.

    Fails: ``cc_model_filenames { key: "sm_86" value: "model_sm86.onnx" }``

    Passes: ``cc_model_filenames { key: "8.6" value: "model_sm86.onnx" }`` with ``1/model_sm86.onnx``
    """
    if model.config is None or not model.config.cc_model_filenames or not judged(model, ctx) or model.is_ensemble:
        return
    resolved = resolve_backend(model)
    if resolved.backend == "tensorrt":
        return  # RB706 (tensorrt-cc-model-filenames) checks plans, with their sidecars
    cc = _cc_filenames(model)
    for key in sorted(cc):
        if not _CC_KEY.match(key):
            yield Finding(
                f"cc_model_filenames key '{key}' is not a compute capability; Triton looks up keys like '8.6'",
                hint='write the key as <major>.<minor>, e.g. "8.6" for an RTX A6000, "9.0" for an H100',
            )
    for number in versions_to_load(model):
        v = version_folder(model, number)
        if v is None:
            continue
        for key, filename in sorted(cc.items()):
            why = _missing(v, filename, resolved.backend, resolved.platform, _inner(model, resolved))
            if why is not None:
                yield Finding(
                    f"cc_model_filenames['{key}'] names '{model.name}/{v.name}/{filename}', which {why}",
                    path=v.path / filename,
                    version=number,
                    hint=f"build {filename} for compute capability {key}, or remove the entry",
                )


def _python_findings(problems: tuple[PythonProblem, ...], path: Path, number: int) -> Iterator[Finding]:
    for message, line, column, severity in problems:
        hint = (
            "fix the syntax; Triton imports this file"
            if "does not parse" in message or "not Python" in message
            else "split the deeply nested expression into smaller statements"
            if "nested too deeply" in message
            else "the Python backend instantiates a class named TritonPythonModel with execute(self, requests)"
        )
        yield Finding(message, path=path, version=number, severity=severity, line=line, column=column, hint=hint)


@rule("RB407", "python-model-invalid", quiet="no_python_source")
def check_python_model(model: ModelEntry, ctx: RuleContext) -> list[Finding]:
    """A Python backend ``model.py`` that does not parse or defines no ``TritonPythonModel``.

    The file is read with ``ast`` and never imported, and only when it is a regular file inside the
    repository (a FIFO or a link to ``/dev/zero`` is reported, never read). The Python backend imports
    it and instantiates ``TritonPythonModel``; a syntax error or a missing class fails the load, a class
    without ``execute`` fails every request.

    A file nested too deeply for ``ast`` (one expression thousands deep) is handed to CPython's
    ``compile()`` in a child process (never executed; at most 2 GiB of memory and 20 s): when it does not
    compile either (``RecursionError``, ``MemoryError``), the stub cannot import it, and the error quotes
    the compiler's own. When it compiles, or the limits stop the child first, its checks were skipped, not
    passed: a warning.

    Fails::

        class Model:            # wrong name
            def execute(self, requests): ...

    Passes::

        class TritonPythonModel:
            def execute(self, requests): ...
    """
    found: list[Finding] = []  # a list, not a generator: cheaper for the many models that find nothing
    resolved = _needs_file(model, ctx)
    if resolved is None or resolved.backend != "python":
        return found
    name = resolved.default_model_filename or "model.py"
    for number in versions_to_load(model):
        v = version_folder(model, number)
        entry = v.entry(name) if v is not None else None
        if v is None or entry is None or entry.is_dir or entry.size is None or entry.escapes:
            continue  # RB405 / RB103 report these
        if entry.size > MAX_PYTHON_BYTES:
            found.append(Finding(f"{name} is {entry.size} bytes; not checked", path=v.path / name, version=number, severity=Severity.INFO))
            continue
        try:
            # read_step_source keeps the text for RB421, which reads the same file
            problems = listed_step_source_fact(
                v, name, entry, model, ctx, (check_python_source, name), lambda s: tuple(check_python_source(s, name))
            )
        except UnsafeFile as exc:
            found.append(Finding(str(exc), path=v.path / name, version=number))
            continue
        if problems:  # the path (a pathlib join) only for a finding
            found.extend(_python_findings(problems, v.path / name, number))
    return found


RULES: tuple[Rule, ...] = (
    check_model_file_missing,
    check_cc_model_filenames,
    check_python_model,
)
