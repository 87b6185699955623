"""Which backend runs a model and which file it loads: core's ``AutoCompleteBackendFields``.

Triton runs this with and without auto-complete (core ``model_config_utils.cc``): the config's
``platform``/``backend``/``default_model_filename`` first, then the file names of the lexicographically
first subfolder only, then a model name of the form ``model.<backend>``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from repo_builder.validate.analysis.backends import (
    FIL_DEFAULT_MODEL_TYPE,
    FIL_MODEL_FILES,
    PYTHON_RUNTIME,
    backend_info,
)
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


# Made once per model of every validate: ``__init__`` writes ``__dict__`` directly (records.py's FileEntry
# does the same), a third of what the frozen dataclass's generated one costs. Still frozen.
@dataclass(frozen=True, init=False)
class ResolvedBackend:
    """Platform, backend and model file name after Triton's server-side auto-completion."""

    platform: str
    backend: str
    default_model_filename: str
    detected_from: str | None = None  # e.g. "1/model.onnx" when found from the files
    first_folder: str | None = None  # the one subfolder Triton inspects
    problem: str | None = None  # Triton's message when it cannot decide
    runtime: str = ""  # the config's runtime ("model.py": PyTorch's Python-based runtime)

    def __init__(
        self,
        platform: str,
        backend: str,
        default_model_filename: str,
        detected_from: str | None = None,
        first_folder: str | None = None,
        problem: str | None = None,
        runtime: str = "",
    ) -> None:
        d = self.__dict__
        d["platform"], d["backend"], d["default_model_filename"] = platform, backend, default_model_filename
        d["detected_from"], d["first_folder"], d["problem"], d["runtime"] = detected_from, first_folder, problem, runtime

    @property
    def shown(self) -> str | None:
        """What a report shows as the model's platform: the platform, else the backend."""
        return self.platform or self.backend or None


def first_folder(model: ModelEntry) -> VersionDir | None:
    # Triton inspects only the first entry of a std::set of subfolder names: byte order.
    if len(model.versions) < 2:
        return model.versions[0] if model.versions else None
    dirs = sorted(model.versions, key=lambda v: os.fsencode(v.name))
    return dirs[0] if dirs else None


def resolve_backend(model: ModelEntry) -> ResolvedBackend:
    """Fill ``platform``/``backend``/``default_model_filename`` from the config and file names as core does."""
    # model_fact inlined: a dozen rules ask for every model, and the extra call was a third of their cost.
    facts = model.facts
    resolved: ResolvedBackend | None = facts.get(resolve_backend)
    if resolved is None:
        resolved = facts[resolve_backend] = _resolve(model)
    return resolved


_TORCH_PLATFORMS = (LIBTORCH, LIBTORCH_ALT, TORCH_AOTI)


def _resolve(model: ModelEntry) -> ResolvedBackend:
    config = model.config
    if config is not None:
        p, b, f, runtime = config.platform, config.backend, config.default_model_filename, config.runtime
    else:
        p = b = f = runtime = ""
    first = first_folder(model)
    first_name = first.name if first is not None else None
    # Core reads file names only without platform and default_model_filename, and with no backend or
    # "tensorflow" (every other backend is settled by the config alone): the common case reads none.
    if not p and not f and (not b or b == "tensorflow"):
        return _from_files(model, b, runtime, first, first_name)
    return _from_config(p, b, f, runtime, first_name)


_TF_BY_FILE = {"model.savedmodel": TF_SAVEDMODEL, "model.graphdef": TF_GRAPHDEF}
_TF_FILES = {TF_SAVEDMODEL: "model.savedmodel", TF_GRAPHDEF: "model.graphdef"}
# The platform and file name core fills in for a backend when the config leaves them empty (pytorch: _pytorch).
_DEFAULTS = {
    "tensorrt": (TRT_PLAN, "model.plan"),
    "onnxruntime": (ORT_ONNX, "model.onnx"),
    "openvino": ("", "model.xml"),
    "python": ("", "model.py"),
}


def _from_config(p: str, b: str, f: str, runtime: str, first_name: str | None) -> ResolvedBackend:
    """Core's order of checks (tensorflow, tensorrt, onnxruntime, openvino, pytorch, python) when the
    config settles the backend without the file names."""
    if not p and b in ("", "tensorflow"):
        p = _TF_BY_FILE.get(f, "")
    if p in _TF_FILES:
        return ResolvedBackend(p, b or "tensorflow", f or _TF_FILES[p], None, first_name, None, runtime)
    b = b or _implied_backend(p, f)
    if b == "pytorch":
        return _pytorch(p, f, runtime, None, first_name)
    defaults = _DEFAULTS.get(b)
    if defaults is not None:
        return ResolvedBackend(p or defaults[0], b, f or defaults[1], None, first_name, None, runtime)
    # Nothing decided: the config's values as they are (without its runtime), Triton's message says why.
    return ResolvedBackend(p, b, f, None, first_name)


def _implied_backend(p: str, f: str) -> str:
    """The backend a platform or file name implies ('' if none): the first in core's order wins."""
    if p == TRT_PLAN or f == "model.plan":
        return "tensorrt"
    if p == ORT_ONNX or f == "model.onnx":
        return "onnxruntime"
    if f == "model.xml":
        return "openvino"
    if p in _TORCH_PLATFORMS or f in ("model.pt", "model.pt2"):
        return "pytorch"
    return "python" if f == "model.py" else ""


def _pytorch(p: str, f: str, runtime: str, found: str | None, first_name: str | None) -> ResolvedBackend:
    if runtime == PYTHON_RUNTIME:  # core sets no default_model_filename for this runtime
        return ResolvedBackend(p or LIBTORCH, "pytorch", f, found, first_name, None, runtime)
    if not p:
        return ResolvedBackend(LIBTORCH, "pytorch", f or "model.pt", found, first_name, None, runtime)
    if p == TORCH_AOTI and not f:
        return ResolvedBackend(p, "pytorch", "model.pt2", found, first_name, None, runtime)
    return ResolvedBackend(p, "pytorch", f, found, first_name, None, runtime)


def _from_files(
    model: ModelEntry, b: str, runtime: str, first: VersionDir | None, first_name: str | None
) -> ResolvedBackend:
    """No platform nor default_model_filename, backend empty or tensorflow: the first folder's file names
    decide, in core's order, then the model name."""
    content = {e.name: e.is_dir for e in first.files} if first is not None else {}
    # A file or folder of the kind core wants (True: a folder, False: a file); graphdef wins over savedmodel.
    if content.get("model.graphdef") is False:
        return ResolvedBackend(
            TF_GRAPHDEF, "tensorflow", "model.graphdef", f"{first_name}/model.graphdef", first_name, None, runtime
        )
    if content.get("model.savedmodel") is True:
        return ResolvedBackend(
            TF_SAVEDMODEL, "tensorflow", "model.savedmodel", f"{first_name}/model.savedmodel", first_name, None, runtime
        )
    if b:  # tensorflow, without its files: undecided
        return ResolvedBackend("", b, "", None, first_name)
    if content.get("model.plan") is False:
        return ResolvedBackend(TRT_PLAN, "tensorrt", "model.plan", f"{first_name}/model.plan", first_name, None, runtime)
    if "model.onnx" in content:
        return ResolvedBackend(ORT_ONNX, "onnxruntime", "model.onnx", f"{first_name}/model.onnx", first_name, None, runtime)
    if "model.xml" in content:
        return ResolvedBackend("", "openvino", "model.xml", f"{first_name}/model.xml", first_name, None, runtime)
    if "model.pt" in content:  # a folder named model.pt hides model.pt2 (core checks model.pt only)
        if content["model.pt"] is False:
            return _pytorch(LIBTORCH, "", runtime, f"{first_name}/model.pt", first_name)
    elif content.get("model.pt2") is False:
        return _pytorch(TORCH_AOTI, "", runtime, f"{first_name}/model.pt2", first_name)
    if "model.py" in content:
        return ResolvedBackend("", "python", "model.py", f"{first_name}/model.py", first_name, None, runtime)
    return _from_name(model, first_name)


def _from_name(model: ModelEntry, first_name: str | None) -> ResolvedBackend:
    config = model.config
    name = config.name if config is not None and config.name else model.name
    if "." not in name:
        problem = (
            f"Invalid model name: Could not determine backend for model '{name}' with no backend in "
            "model configuration. Expected model name of the form 'model.<backend_name>'."
        )
        return ResolvedBackend("", "", "", None, first_name, problem)
    b = name.split(".", 1)[1]
    return ResolvedBackend("", b, f"model.{b}", f"the model name '{name}'", first_name)


def model_file_names(resolved: ResolvedBackend) -> tuple[str, ...]:
    """The files the backend loads from a version folder, in the order it tries them (empty: unknown).

    ``default_model_filename`` names the file; otherwise the backend's own default, and for DALI its
    fallback ``dali.py``; PyTorch's Python-based runtime tries ``model.py`` then ``model.pt`` (backends.py
    cites the sources).
    """
    name = resolved.default_model_filename
    info = backend_info(resolved.backend, resolved.platform, resolved.runtime)
    if info is None:
        return (name,) if name else ()
    files = info.model_files
    if not name:
        return files
    if resolved.runtime == PYTHON_RUNTIME:
        return (name, *(n for n in files if n != name))  # the others are tried after it
    return files if files and files[0] == name else (name, *files[1:])  # the default named: the table's own


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


def platform_faults(model: ModelEntry, ctx: RuleContext) -> tuple[str, ...]:
    """Which of the platform rules find something in the model (RB401 undetermined, RB402 a platform without a
    backend, RB403 platform and backend apart or an ensemble naming a backend, RB404 a backend NVIDIA's images
    do not ship): the rules and the engine's quiet flag (none) both ask this."""
    if not judged(model, ctx):
        return ()
    resolved = resolve_backend(model)
    problem, backend, platform = resolved.problem, resolved.backend, resolved.platform
    faults = []
    if problem is not None:
        faults.append("RB401")
    elif not backend and platform != ENSEMBLE:
        faults.append("RB402")
    if backend:
        runtime = BACKEND_TYPE.get(backend)
        if platform == ENSEMBLE or (runtime is not None and runtime != PLATFORM_TYPE.get(platform)):
            faults.append("RB403")
        if backend not in STANDARD_BACKENDS and problem is None:
            faults.append("RB404")
    return tuple(faults)
