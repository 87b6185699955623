"""Which backend runs a model and which file it loads: core's ``AutoCompleteBackendFields``.

Triton runs this with and without auto-complete (core ``model_config_utils.cc``): the config's
``platform``/``backend``/``default_model_filename`` first, then the file names of the lexicographically
first subfolder only, then a model name of the form ``model.<backend>``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from repo_builder.validate.analysis.backends import (
    FIL_DEFAULT_MODEL_TYPE,
    FIL_MODEL_FILES,
    PYTHON_RUNTIME,
    backend_info,
)
from repo_builder.validate.analysis.memo import model_fact
from repo_builder.validate.records import ModelEntry, RuleContext, VersionDir

ENSEMBLE = "ensemble"
TF_SAVEDMODEL, TF_GRAPHDEF = "tensorflow_savedmodel", "tensorflow_graphdef"
TRT_PLAN, ORT_ONNX, LIBTORCH, LIBTORCH_ALT, TORCH_AOTI = (
    "tensorrt_plan",
    "onnxruntime_onnx",
    "pytorch_libtorch",
    "libtorch",
    "torch_aoti",
)
# The backend types core knows by name (GetBackendType / GetBackendTypeFromPlatform); others are "unknown"
# and pair with any platform.
BACKEND_TYPE = {"tensorflow": "tf", "tensorrt": "trt", "onnxruntime": "ort", "pytorch": "torch"}
PLATFORM_TYPE = {
    TF_GRAPHDEF: "tf",
    TF_SAVEDMODEL: "tf",
    TRT_PLAN: "trt",
    ORT_ONNX: "ort",
    LIBTORCH: "torch",
    TORCH_AOTI: "aoti",
}
# Backends shipped in NVIDIA's tritonserver containers; anything else needs its own library installed.
STANDARD_BACKENDS = frozenset(
    {
        "tensorrt",
        "onnxruntime",
        "pytorch",
        "tensorflow",
        "openvino",
        "python",
        "dali",
        "fil",
        "identity",
        "repeat",
        "square",
        "vllm",
        "tensorrtllm",
    }
)
# Backends that load a model file from the version folder (identity, repeat, fil ... read none we know of).
FILE_BACKENDS = frozenset(
    {"tensorrt", "onnxruntime", "pytorch", "tensorflow", "openvino", "python", "dali", "fil", "vllm"}
)


@dataclass(frozen=True)
class ResolvedBackend:
    """Platform, backend and model file name after Triton's server-side auto-completion."""

    platform: str
    backend: str
    default_model_filename: str
    detected_from: str | None = None  # e.g. "1/model.onnx" when found from the files
    first_folder: str | None = None  # the one subfolder Triton inspects
    problem: str | None = None  # Triton's message when it cannot decide
    runtime: str = ""  # the config's runtime ("model.py": PyTorch's Python-based runtime)

    @property
    def shown(self) -> str | None:
        """What a report shows as the model's platform: the platform, else the backend."""
        return self.platform or self.backend or None


class _Probe:
    """The first version folder's entries, and which of them decided the backend."""

    def __init__(self, first: VersionDir | None, scan: bool) -> None:
        self.content = {e.name: e.is_dir for e in first.files} if first is not None else {}
        self.first_name = first.name if first is not None else None
        self.scan = scan  # file names count only without a default_model_filename
        self.found: str | None = None

    def seen(self, name: str, want_dir: bool | None) -> bool:
        if self.scan and name in self.content and (want_dir is None or self.content[name] == want_dir):
            self.found = f"{self.first_name}/{name}"
            return True
        return False

    def done(self, platform: str, backend: str, filename: str) -> ResolvedBackend:
        return ResolvedBackend(platform, backend, filename, self.found, self.first_name)


def first_folder(model: ModelEntry) -> VersionDir | None:
    # Triton inspects only the first entry of a std::set of subfolder names: byte order.
    if len(model.versions) < 2:
        return model.versions[0] if model.versions else None
    dirs = sorted(model.versions, key=lambda v: os.fsencode(v.name))
    return dirs[0] if dirs else None


def resolve_backend(model: ModelEntry) -> ResolvedBackend:
    """Fill ``platform``/``backend``/``default_model_filename`` from the config and file names as core does."""
    return model_fact(model, resolve_backend, _resolve)


def _tensorflow(p: str, b: str, f: str, probe: _Probe) -> ResolvedBackend | None:
    if not p and b in ("", "tensorflow"):
        if f == "model.savedmodel":
            p = TF_SAVEDMODEL
        elif f == "model.graphdef":
            p = TF_GRAPHDEF
        else:
            if probe.seen("model.savedmodel", True):
                p = TF_SAVEDMODEL
            if probe.seen("model.graphdef", False):
                p = TF_GRAPHDEF
    if p in (TF_SAVEDMODEL, TF_GRAPHDEF):
        return probe.done(p, b or "tensorflow", f or ("model.savedmodel" if p == TF_SAVEDMODEL else "model.graphdef"))
    return None


# (backend, platform that implies it, its default file, file kind: True folder, False file, None either),
# in the order core tries them.
_BY_FILE = (
    ("tensorrt", TRT_PLAN, "model.plan", False),
    ("onnxruntime", ORT_ONNX, "model.onnx", None),
    ("openvino", "", "model.xml", None),
)
_PYTHON = ("python", "", "model.py", None)


def _by_file(p: str, b: str, f: str, probe: _Probe, entry: tuple[str, str, str, bool | None]) -> ResolvedBackend | None:
    backend, implied, filename, kind = entry
    if not b and ((implied and p == implied) or f == filename or (not p and probe.seen(filename, kind))):
        b = backend
    if b == backend:
        return probe.done(p or implied, b, f or filename)
    return None


def _pytorch(p: str, b: str, f: str, probe: _Probe, runtime: str = "") -> ResolvedBackend | None:
    if not b:
        if p in (LIBTORCH, LIBTORCH_ALT, TORCH_AOTI) or f in ("model.pt", "model.pt2"):
            b = "pytorch"
        elif not p and probe.scan:
            if "model.pt" in probe.content:
                if probe.seen("model.pt", False):
                    b, p = "pytorch", LIBTORCH
            elif probe.seen("model.pt2", False):
                b, p = "pytorch", TORCH_AOTI
    if b != "pytorch":
        return None
    if runtime == PYTHON_RUNTIME:  # core sets no default_model_filename for this runtime
        return probe.done(p or LIBTORCH, b, f)
    if not p:
        return probe.done(LIBTORCH, b, f or "model.pt")
    if p == TORCH_AOTI and not f:
        return probe.done(p, b, "model.pt2")
    return probe.done(p, b, f)


def _from_name(model: ModelEntry, probe: _Probe) -> ResolvedBackend:
    config = model.config
    name = config.name if config is not None and config.name else model.name
    if "." not in name:
        problem = (
            f"Invalid model name: Could not determine backend for model '{name}' with no backend in "
            "model configuration. Expected model name of the form 'model.<backend_name>'."
        )
        return ResolvedBackend("", "", "", None, probe.first_name, problem)
    b = name.split(".", 1)[1]
    return ResolvedBackend("", b, f"model.{b}", f"the model name '{name}'", probe.first_name)


def _resolve(model: ModelEntry) -> ResolvedBackend:
    config = model.config
    p = config.platform if config is not None else ""
    b = config.backend if config is not None else ""
    f = config.default_model_filename if config is not None else ""
    first = first_folder(model)
    probe = _Probe(first, scan=not f and first is not None)
    # In core's order; plain calls (no partials): this runs once per model of every validate.
    resolved = _tensorflow(p, b, f, probe)
    for entry in _BY_FILE:
        if resolved is not None:
            break
        resolved = _by_file(p, b, f, probe, entry)
    if resolved is None:
        resolved = _pytorch(p, b, f, probe, config.runtime if config is not None else "")
    if resolved is None:
        resolved = _by_file(p, b, f, probe, _PYTHON)
    if resolved is not None:
        return replace(resolved, runtime=config.runtime) if config is not None and config.runtime else resolved
    if not b and not p and not f:
        return _from_name(model, probe)
    return probe.done(p, b, f)


def model_file_names(resolved: ResolvedBackend) -> tuple[str, ...]:
    """The files the backend loads from a version folder, in the order it tries them (empty: unknown).

    ``default_model_filename`` names the file; otherwise the backend's own default, and for DALI its
    fallback ``dali.py``; PyTorch's Python-based runtime tries ``model.py`` then ``model.pt`` (backends.py
    cites the sources).
    """
    info = backend_info(resolved.backend, resolved.platform, resolved.runtime)
    fallbacks = info.model_files[1:] if info is not None else ()
    if info is not None and resolved.runtime == PYTHON_RUNTIME:
        fallbacks = tuple(n for n in info.model_files if n != resolved.default_model_filename)  # tried after it
    if resolved.default_model_filename:
        return (resolved.default_model_filename, *fallbacks)
    return info.model_files if info is not None else ()


def fil_model_file(model: ModelEntry) -> str | None:
    """The file the FIL backend reads inside the version folder (or the folder default_model_filename
    names), from the ``model_type`` parameter; None for a type FIL does not know (it refuses it)."""
    params = model.config.parameters if model.config is not None else {}
    model_type = params["model_type"].string_value if "model_type" in params else FIL_DEFAULT_MODEL_TYPE
    return FIL_MODEL_FILES.get(model_type)


def loaded_file_names(model: ModelEntry, resolved: ResolvedBackend) -> tuple[str, ...]:
    """``model_file_names`` for this model: FIL's file comes from its ``model_type`` parameter, vLLM
    always reads ``model.json``."""
    if resolved.backend == "fil" and not resolved.default_model_filename:
        name = fil_model_file(model)
        return (name,) if name is not None else ()
    if resolved.backend == "vllm":
        return ("model.json",)  # read whatever default_model_filename says (vllm_backend src/model.py)
    return model_file_names(resolved)


def config_name(model: ModelEntry) -> str:
    """The name Triton uses in its messages: the config's, else the folder's (auto-complete sets it)."""
    return (model.config.name if model.config is not None else "") or model.name


def model_backend(model: ModelEntry) -> str:
    """The backend Triton resolves for the model ('' if none)."""
    return resolve_backend(model).backend


def judged(model: ModelEntry, ctx: RuleContext) -> bool:
    """Whether platform and model-file rules apply: a readable model (hidden ones too: Triton loads them)
    whose config parsed, or is absent and auto-complete may fill it in (under --strict a missing config
    is refused first: RB105)."""
    if model.problem is not None:
        return False
    if model.config is not None:
        return True
    return not model.has_config_file and not ctx.options.strict
