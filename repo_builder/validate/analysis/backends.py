"""What each Triton backend does with a model folder, as data: file names, auto-complete, devices.

Every entry cites the upstream source it was read from (Triton 2.51 / r24.10 branches). Rules ask
this table instead of hard-coding one backend's behaviour for all.
"""

from __future__ import annotations

from dataclasses import dataclass

from repo_builder.compat import StrEnum


class IoFill(StrEnum):
    """What a backend's auto-complete writes into a config's ``input``/``output`` (auto-complete on)."""

    NOTHING = "nothing"  # the config must declare every input and output itself
    WHEN_NONE_DECLARED = "when-none-declared"  # inputs only when the config lists none (outputs likewise)
    FROM_MODEL_FILE = "from-model-file"  # missing inputs/outputs and their fields come from the file
    PYTHON_HOOK = "python-hook"  # only what model.py's ``auto_complete_config`` sets


class Device(StrEnum):
    """The instance kinds a backend accepts once core has resolved KIND_AUTO."""

    CPU = "cpu"
    GPU = "gpu"
    MODEL = "model"  # KIND_MODEL: the model places itself on devices


@dataclass(frozen=True)
class BackendInfo:
    name: str
    model_files: tuple[str, ...]  # the default model file first, then fallbacks the backend also loads
    io_fill: IoFill
    devices: frozenset[Device]
    source: str  # the upstream file this entry was read from
    # The backend may set max_batch_size/dynamic_batching even when the config declares all its IO.
    fills_batching_always: bool = False

    @property
    def default_file(self) -> str | None:
        return self.model_files[0] if self.model_files else None

    @property
    def gpu_only(self) -> bool:
        """No CPU instances: the KIND_CPU that KIND_AUTO becomes without GPUs is refused."""
        return Device.CPU not in self.devices

    @property
    def cpu_only(self) -> bool:
        return self.devices == frozenset({Device.CPU})


_BOTH = frozenset({Device.CPU, Device.GPU, Device.MODEL})  # no backend check refuses a kind

# Read from the r24.10 branches (Triton 2.51) of each repository under github.com/triton-inference-server;
# docs/backends.md lists the same sources.
BACKENDS: dict[str, BackendInfo] = {
    # tensorrt_backend src/model_state.cc: AutoCompleteConfig runs only when the first instance group is
    # KIND_GPU and then FixIO fills missing tensors and missing fields of declared ones from the engine;
    # src/instance_state.cc refuses any non-GPU instance, KIND_MODEL too ("TensorRT backend supports
    # only GPU device").
    "tensorrt": BackendInfo("tensorrt", ("model.plan",), IoFill.FROM_MODEL_FILE, frozenset({Device.GPU}),
                            "tensorrt_backend src/model_state.cc, src/instance_state.cc"),
    # onnxruntime_backend src/onnxruntime.cc ModelState::AutoCompleteConfig: skipped when inputs (plus
    # batch_input) and outputs are both declared; otherwise inputs are filled only when none is declared
    # (`if (input_cnt == 0)`), outputs likewise. LoadModel: a model.onnx folder holds <folder>/model.onnx.
    "onnxruntime": BackendInfo("onnxruntime", ("model.onnx",), IoFill.WHEN_NONE_DECLARED, _BOTH,
                               "onnxruntime_backend src/onnxruntime.cc"),
    # pytorch_backend src/libtorch.cc ModelState::AutoCompleteConfig: "not supported for pytorch backend"
    # (TorchScript carries no IO metadata); KIND_CPU, KIND_GPU and KIND_MODEL instances all run.
    "pytorch": BackendInfo("pytorch", ("model.pt",), IoFill.NOTHING, _BOTH, "pytorch_backend src/libtorch.cc"),
    # tensorflow_backend src/tensorflow.cc ModelState::AutoCompleteConfig: only SavedModel is filled
    # (AutoCompleteHelper::FixConfigInputs fills declared tensors too); "Nothing to be filled for graphdef"
    # (see TENSORFLOW_GRAPHDEF below).
    "tensorflow": BackendInfo("tensorflow", ("model.savedmodel",), IoFill.FROM_MODEL_FILE, _BOTH,
                              "tensorflow_backend src/tensorflow.cc"),
    # openvino_backend src/openvino.cc: AutoCompleteInputOrOutput fills inputs only when the config
    # declares none (outputs likewise) while AutoCompleteBatching always runs; ModelInstanceState refuses
    # any kind but KIND_CPU ("Triton openVINO backend supports only CPU device") and
    # TRITONBACKEND_GetBackendAttribute prefers KIND_CPU, so a config without instance_group gets CPU.
    "openvino": BackendInfo("openvino", ("model.xml",), IoFill.WHEN_NONE_DECLARED, frozenset({Device.CPU}),
                            "openvino_backend src/openvino.cc", fills_batching_always=True),
    # python_backend src/python_be.cc: the stub runs TritonPythonModel.auto_complete_config if defined;
    # the preferred instance kind is KIND_GPU in GPU builds, which core skips on machines without GPUs.
    "python": BackendInfo("python", ("model.py",), IoFill.PYTHON_HOOK, _BOTH, "python_backend src/python_be.cc"),
    # dali_backend src/dali_model.h: `fallback_model_filename_` is dali.py, loaded (and serialized) when
    # model.dali cannot be (model.dali may itself be an @autoserialize Python script); the file name must
    # pass ValidateFilename (rules/dali.py RB411). The pipeline is instantiated with the config's
    # max_batch_size (0 = not batched), so its serialized batch size refuses nothing; on the server's GPU,
    # else on the CPU (GPU operators then fail: RB413). src/config_tools/config_tools.cc AutofillConfig fills
    # declared and missing tensors, max_batch_size (the pipeline's) and an empty dynamic_batching, and sets
    # allow_ragged_batch on inputs; inputs match by name, outputs by position (RB412).
    "dali": BackendInfo("dali", ("model.dali", "dali.py"), IoFill.FROM_MODEL_FILE, _BOTH,
                        "dali_backend src/dali_model.h, src/config_tools/config_tools.cc"),
    # fil_backend src/model.h model_file(): the file inside the version folder depends on the
    # `model_type` parameter (FIL_MODEL_FILES below); no auto-complete of IO in src/.
    "fil": BackendInfo("fil", (), IoFill.NOTHING, _BOTH, "fil_backend src/model.h, src/serialization.h"),
    # vllm_backend src/model.py: a Python-based backend; auto_complete_config adds its fixed IO and
    # init_engine asserts <version>/model.json (the engine arguments) exists. validate_device_config
    # refuses KIND_GPU only with tensor_parallel_size > 1 and no kind otherwise (vLLM itself needs the
    # hardware it was built for: the model's own code, not a configuration rule).
    "vllm": BackendInfo("vllm", ("model.json",), IoFill.PYTHON_HOOK, _BOTH,
                        "vllm_backend src/model.py"),
}

# tensorflow_backend src/tensorflow.cc: "Nothing to be filled for graphdef".
TENSORFLOW_GRAPHDEF = BackendInfo("tensorflow", ("model.graphdef",), IoFill.NOTHING, _BOTH,
                                  "tensorflow_backend src/tensorflow.cc")
# core src/constants.h (kPyTorchAotiFilename) and pytorch_backend src/libtorch.cc on main: torch_aoti
# packages load model.pt2. Newer than 2.51 (absent from the r24.10 branches): kept for later targets.
TORCH_AOTI_INFO = BackendInfo("pytorch", ("model.pt2",), IoFill.NOTHING, _BOTH, "pytorch_backend src/libtorch.cc")
# fil_backend src/serialization.h (the `model_type` values) and src/model.h model_file(): the file read
# from the version folder (or from the folder default_model_filename names); src/shared_state.h makes
# "xgboost" the default model_type.
FIL_MODEL_FILES: dict[str, str] = {
    "xgboost": "xgboost.model",
    "xgboost_json": "xgboost.json",
    "xgboost_ubj": "xgboost.ubj",
    "lightgbm": "model.txt",
    "treelite_checkpoint": "checkpoint.tl",
}
FIL_DEFAULT_MODEL_TYPE = "xgboost"

# core src/model_config_utils.cc leaves default_model_filename empty for a PyTorch model with
# runtime "model.py"; pytorch_backend src/model.py (_get_model_path) then loads model.py, else model.pt,
# from the version folder.
PYTORCH_PYTHON_RUNTIME = BackendInfo("pytorch", ("model.py", "model.pt"), IoFill.NOTHING, _BOTH,
                                     "pytorch_backend src/model.py")
PYTHON_RUNTIME = "model.py"


def backend_info(backend: str, platform: str = "", runtime: str = "") -> BackendInfo | None:
    """The table entry for a resolved backend (platform picks TensorFlow's or PyTorch's flavour, and
    ``runtime: "model.py"`` PyTorch's Python-based runtime)."""
    if backend == "pytorch" and runtime == PYTHON_RUNTIME:
        return PYTORCH_PYTHON_RUNTIME
    if backend == "tensorflow" and platform == "tensorflow_graphdef":
        return TENSORFLOW_GRAPHDEF
    if backend == "pytorch" and platform == "torch_aoti":
        return TORCH_AOTI_INFO
    return BACKENDS.get(backend)


def fills_io(backend: str, platform: str = "") -> bool:
    """Whether auto-complete may fill inputs/outputs from the model file (python: ask its hook)."""
    info = backend_info(backend, platform)
    return info is not None and info.io_fill in (IoFill.FROM_MODEL_FILE, IoFill.WHEN_NONE_DECLARED)
