"""What Triton's auto-complete (on by default) fills in before it checks a config's inputs and outputs.

Per backend (backends.py): ONNX Runtime and OpenVINO fill inputs only when the config declares none
(outputs likewise); TensorRT, TensorFlow SavedModel and DALI read them from the model file; a Python
model only through ``TritonPythonModel.auto_complete_config``; PyTorch and TensorFlow GraphDef fill
nothing. Under ``--strict`` (``--disable-auto-complete-config``) nothing is filled.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from repo_builder.triton_layout import MAX_PYTHON_BYTES
from repo_builder.validate.analysis.backends import IoFill, backend_info
from repo_builder.validate.analysis.files import UnsafeFile, read_bounded
from repo_builder.validate.analysis.python_source import python_defines_autocomplete
from repo_builder.validate.analysis.resolve import resolve_backend
from repo_builder.validate.analysis.versions import version_folder, versions_to_load
from repo_builder.validate.records import ModelEntry, RuleContext


def _python_autocompletes(path: Path, root: Path) -> bool:
    """Whether a model.py may define ``auto_complete_config`` (read with ``ast``, never imported)."""
    try:
        st = path.stat()
    except (OSError, ValueError):
        return True  # unreadable: assume it might fill things in; RB4xx reports the file itself
    return _read_autocompletes(str(path), str(root), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=4096)
def _read_autocompletes(path: str, root: str, mtime_ns: int, size: int) -> bool:
    # Keyed by modification time and size too: a rewritten model.py is read again. Strings, not paths:
    # hashing a pathlib path costs more than the rest of a hit.
    try:
        source = read_bounded(Path(path), Path(root), MAX_PYTHON_BYTES)
    except UnsafeFile:
        return True  # unreadable: assume it might fill things in; RB4xx reports the file itself
    return python_defines_autocomplete(source)


def python_io_autocompleted(model: ModelEntry) -> bool:
    """Whether the model.py of a version Triton loads defines ``auto_complete_config`` (the Python
    backend runs it per loaded version, from ``<version>/<default_model_filename>``)."""
    filename = resolve_backend(model).default_model_filename or "model.py"
    numbers = versions_to_load(model)
    if not numbers:
        return True  # nothing loads (RB110): no answer
    root = os.path.dirname(str(model.path))
    for number in numbers:
        folder = version_folder(model, number)
        entry = folder.entry(filename) if folder is not None else None
        if folder is None or entry is None or entry.is_dir or entry.escapes:
            continue  # RB405 / RB103 refuse the version
        if entry.mtime_ns is not None and entry.size is not None:  # the scan's stat: no second one
            if _read_autocompletes(os.path.join(str(folder.path), filename), root, entry.mtime_ns, entry.size):
                return True
        elif _python_autocompletes(folder.path / filename, model.path.parent):
            return True
    return False


def backend_fills_io(model: ModelEntry, declared: bool = False) -> bool:
    """True when auto-complete lets the backend fill in inputs/outputs from the model file.

    ``declared``: the config already declares some (ONNX Runtime then fills nothing of its kind).
    """
    resolved = resolve_backend(model)
    info = backend_info(resolved.backend, resolved.platform)
    if info is None:
        return False
    if info.io_fill == IoFill.WHEN_NONE_DECLARED:
        return not declared
    if info.io_fill == IoFill.PYTHON_HOOK:
        return resolved.backend != "python" or python_io_autocompleted(model)
    return info.io_fill == IoFill.FROM_MODEL_FILE


def io_autocompleted(model: ModelEntry, ctx: RuleContext) -> bool:
    """True when Triton may let the backend add or change inputs/outputs (and batching) before checking."""
    cfg = model.config
    if ctx.options.strict or cfg is None:
        return False
    resolved = resolve_backend(model)
    info = backend_info(resolved.backend, resolved.platform)
    if info is not None and info.fills_batching_always:
        return True  # OpenVINO may set max_batch_size even when every tensor is declared
    return backend_fills_io(model, declared=bool(cfg.input) and bool(cfg.output))


def declared_io_filled(model: ModelEntry, ctx: RuleContext) -> bool:
    """Whether a declared input or output with a missing ``data_type``/``dims`` gets them from the model
    file: never for ONNX Runtime or OpenVINO (they fill only when none of that kind is declared)."""
    if ctx.options.strict or model.config is None:
        return False
    return backend_fills_io(model, declared=True)
