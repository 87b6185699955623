"""A Python-backend stand-in for an ONNX Runtime model: copied as ``model.py`` into a staged repository.

The embedded Triton has only the Python backend. ``validate --live`` serves each ONNX Runtime model
through this file (config ``backend: "python"``, platform kept): it first performs the ONNX Runtime
backend's own load-time checks with that backend's messages, then answers requests by running the same
ONNX file with onnxruntime. Sources of the checks and messages (triton-inference-server/onnxruntime_backend):
``src/onnxruntime.cc`` (``ValidateInputs``, ``ValidateOutputs``, ``AutoCompleteConfig``,
``AutoCompleteMaxBatch``, ``AutoCompleteIO``), ``src/onnxruntime_utils.cc`` (``CompareDimsSupported``) and
the backend common ``CheckAllowedModelInput``/``CheckAllowedModelOutput``.

This module runs inside the Python-backend stub: it imports nothing from repo_builder. What it needs
(the ONNX file's name; on the target image's Python, the folder holding onnxruntime built for it) comes
from ``standin.json`` beside it, read at run time.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SETTINGS_FILE = "standin.json"
MARKER = "[onnxruntime stand-in]"  # refusals carry it: the caller tells them from the model's own errors
DEFAULT_MAX_BATCH_SIZE = 4  # Triton's default --backend-config default-max-batch-size

# ONNX Runtime's type strings and Triton's config data types (onnxruntime_utils.cc).
ORT_TO_CONFIG = {
    "tensor(float)": "TYPE_FP32",
    "tensor(uint8)": "TYPE_UINT8",
    "tensor(int8)": "TYPE_INT8",
    "tensor(uint16)": "TYPE_UINT16",
    "tensor(int16)": "TYPE_INT16",
    "tensor(int32)": "TYPE_INT32",
    "tensor(int64)": "TYPE_INT64",
    "tensor(string)": "TYPE_STRING",
    "tensor(bool)": "TYPE_BOOL",
    "tensor(float16)": "TYPE_FP16",
    "tensor(double)": "TYPE_FP64",
    "tensor(uint32)": "TYPE_UINT32",
    "tensor(uint64)": "TYPE_UINT64",
    "tensor(bfloat16)": "TYPE_BF16",
}


class StandInRefusal(Exception):
    """What the ONNX Runtime backend would refuse the model with."""

    def __init__(self, message: str) -> None:
        super().__init__(f"{MARKER} {message}")


def graph_io(session: Any) -> tuple[dict[str, tuple[str, list[int]]], dict[str, tuple[str, list[int]]]]:
    """name -> (config data type, dims with -1 for symbolic) for the session's inputs and outputs."""

    def infos(nodes: Sequence[Any]) -> dict[str, tuple[str, list[int]]]:
        return {
            n.name: (ORT_TO_CONFIG.get(n.type, n.type), [d if isinstance(d, int) else -1 for d in (n.shape or [])])
            for n in nodes
        }

    return infos(session.get_inputs()), infos(session.get_outputs())


def shape_text(dims: Sequence[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def config_dims(io: Mapping[str, Any]) -> list[int]:
    """A config tensor's dims (``reshape.shape`` when given), as ints (the JSON may carry strings)."""
    reshape = io.get("reshape")
    source = reshape.get("shape", []) if isinstance(reshape, Mapping) else io.get("dims", [])
    return [int(d) for d in source]


def compare_dims(model: str, tensor: str, model_shape: list[int], dims: list[int], max_batch: int, exact: bool) -> None:
    """``CompareDimsSupported``: the graph's shape against the config's (with a batch axis when batching)."""
    if max_batch > 0:
        if not model_shape or model_shape[0] != -1:
            raise StandInRefusal(
                f"model '{model}', tensor '{tensor}': for the model to support batching the shape should have "
                "at least 1 dimension and the first dimension must be -1; but shape expected by the model is "
                + shape_text(model_shape)
            )
        full = [-1, *dims]
        if not _dims_match(model_shape, full, exact):
            raise StandInRefusal(
                f"model '{model}', tensor '{tensor}': the model expects {len(model_shape)} dimensions (shape "
                f"{shape_text(model_shape)}) but the model configuration specifies {len(full)} dimensions (an "
                "initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, "
                f"making complete shape {shape_text(full)})"
            )
    elif not _dims_match(model_shape, dims, exact):
        raise StandInRefusal(
            f"model '{model}', tensor '{tensor}': the model expects {len(model_shape)} dimensions (shape "
            f"{shape_text(model_shape)}) but the model configuration specifies {len(dims)} dimensions (shape "
            f"{shape_text(dims)})"
        )


def _dims_match(model_shape: list[int], dims: list[int], exact: bool) -> bool:
    if len(model_shape) != len(dims):
        return False
    return all(m == d for m, d in zip(model_shape, dims, strict=True) if exact or m != -1)


def _check_tensor(model: str, kind: str, io: Mapping[str, Any], graph: Mapping[str, tuple[str, list[int]]], max_batch: int) -> None:
    name = str(io.get("name", ""))
    if name not in graph:
        allowed = ", ".join(sorted(graph))
        raise StandInRefusal(f"unexpected inference {kind} '{name}', allowed {kind}s are: {allowed}")
    data_type, model_shape = graph[name]
    wanted = str(io.get("data_type", ""))
    if wanted != data_type:
        raise StandInRefusal(
            f"unable to load model '{model}', configuration expects datatype {wanted} for {kind} '{name}', "
            f"model provides {data_type}"
        )
    dims = config_dims(io)
    if model_shape:
        compare_dims(model, name, model_shape, dims, max_batch, exact=kind == "output")
    elif any(d != 1 for d in dims):
        raise StandInRefusal(
            f"unable to load model '{model}', scalar tensor '{name}', should only provide 1 in the model "
            f"configuration when the model doesn't support batching. Model configuration provided: "
            f"{shape_text(dims)}."
        )


def check_config(config: Mapping[str, Any], inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
    """``ValidateInputs`` and ``ValidateOutputs``: raise ``StandInRefusal`` where the backend refuses."""
    model = str(config.get("name", ""))
    max_batch = int(config.get("max_batch_size", 0) or 0)
    declared = list(config.get("input", []))
    expected = sum(1 for io in declared if not io.get("optional", False)) + len(config.get("batch_input", []))
    if len(inputs) != expected:
        raise StandInRefusal(
            f"unable to load model '{model}', configuration expects {expected} inputs, model provides {len(inputs)}"
        )
    for io in declared:
        if io.get("optional", False) and max_batch != 0:
            raise StandInRefusal(
                f"unable to load model '{model}', optional input '{io.get('name')}' is not supported for "
                "models that support batching"
            )
        _check_tensor(model, "input", io, inputs, max_batch)
    for io in config.get("output", []):
        _check_tensor(model, "output", io, outputs, max_batch)


def completed_config(config: Mapping[str, Any], inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> dict[str, Any]:
    """``AutoCompleteConfig``: max_batch_size and IO filled in as the ONNX Runtime backend fills them."""
    done = dict(config)
    if config.get("input") and config.get("output"):
        return done
    graph = [*inputs.values(), *outputs.values()]
    batching = all(dims and dims[0] == -1 for _, dims in graph)
    max_batch = int(done.get("max_batch_size", 0) or 0)
    if batching and max_batch == 0:
        max_batch = done["max_batch_size"] = DEFAULT_MAX_BATCH_SIZE
    elif not batching and max_batch != 0:
        raise StandInRefusal(
            f"autofill failed for model '{config.get('name')}': model does not support batching while "
            "non-zero max_batch_size is specified"
        )
    for key, infos in (("input", inputs), ("output", outputs)):
        if not config.get(key):
            done[key] = [_completed_io(name, dtype, dims, max_batch) for name, (dtype, dims) in infos.items()]
    return done


def _completed_io(name: str, dtype: str, dims: list[int], max_batch: int) -> dict[str, Any]:
    shown = dims[1:] if max_batch > 0 else list(dims)
    io: dict[str, Any] = {"name": name, "data_type": dtype, "dims": shown or [1]}
    if not shown and max_batch > 0:
        io["reshape"] = {"shape": []}
    return io


def _settings() -> dict[str, Any]:
    return json.loads((Path(__file__).parent / SETTINGS_FILE).read_text(encoding="utf-8"))


def op_libraries(config: Mapping[str, Any]) -> list[str]:
    """``model_operations.op_library_filename``: the custom-op libraries the backend registers before loading."""
    operations = config.get("model_operations") or {}
    return [str(p) for p in (operations.get("op_library_filename") or [])] if isinstance(operations, Mapping) else []


def library_here(library: str) -> str:
    """A library the config names in the image's system ``dist-packages`` (where the Dockerfile's pip install
    puts it) is, for the stand-in, the same package in the Python running it; any other path as written."""
    if os.path.exists(library) or "/dist-packages/" not in library:
        return library
    relative = library.split("/dist-packages/", 1)[1]
    folder, name = os.path.split(relative)
    stem = name.split(".cpython-", 1)[0]  # the file is named for the image's Python; this one may differ
    for entry in sys.path:
        found = sorted(glob.glob(os.path.join(entry, folder, glob.escape(stem) + "*.so")))
        if os.path.exists(os.path.join(entry, relative)):
            return os.path.join(entry, relative)
        if found:
            return found[0]
    return library


def _session(config: Mapping[str, Any]) -> Any:
    settings = _settings()
    packages = settings.get("packages")
    # The image's Python has no onnxruntime: ours comes from a folder of its own, on this stub's path only
    # (each model has its own stub process), appended so that it never shadows the image's numpy.
    if packages and packages not in sys.path:
        sys.path.append(str(packages))
    import onnxruntime  # heavy: imported by the stub only

    onnx_file = Path(__file__).parent / str(settings["onnx"])
    if onnx_file.is_dir():  # Triton accepts a model.onnx folder holding model.onnx (external data beside it)
        onnx_file = onnx_file / "model.onnx"
    options = onnxruntime.SessionOptions()
    try:
        # As the backend does (onnxruntime.cc): each library registered as written, before the session loads.
        for library in op_libraries(config):
            options.register_custom_ops_library(library_here(library))
        return onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own load errors: the backend refuses the model with them
        raise StandInRefusal(f"onnx runtime error: {' '.join(str(exc).split())}") from None


class TritonPythonModel:
    """Checks the config against the ONNX graph at load, then runs the graph over each execution's requests."""

    @staticmethod
    def auto_complete_config(auto_complete_model_config: Any) -> Any:
        config = auto_complete_model_config.as_dict()
        inputs, outputs = graph_io(_session(config))
        done = completed_config(config, inputs, outputs)
        if int(done.get("max_batch_size", 0) or 0) != int(config.get("max_batch_size", 0) or 0):
            auto_complete_model_config.set_max_batch_size(int(done["max_batch_size"]))
        for key, add in (("input", auto_complete_model_config.add_input), ("output", auto_complete_model_config.add_output)):
            if not config.get(key):
                for io in done[key]:
                    add(io)
        return auto_complete_model_config

    def initialize(self, args: Mapping[str, str]) -> None:
        self.config = json.loads(args["model_config"])
        self.session = _session(self.config)
        inputs, outputs = graph_io(self.session)
        check_config(self.config, inputs, outputs)
        self.outputs = [str(o["name"]) for o in self.config.get("output", [])]
        # Read once: the session's node list is rebuilt as Python objects on every call.
        self.inputs = [(node.name, node.type == "tensor(string)") for node in self.session.get_inputs()]
        self.batching = int(self.config.get("max_batch_size", 0) or 0) > 0

    def execute(self, requests: Sequence[Any]) -> list[Any]:
        import triton_python_backend_utils as pb_utils  # exists only inside the stub

        feeds = [self._feed(request, pb_utils) for request in requests]
        # As the backend does: the requests of one execution run as ONE batch (the dynamic batcher gathers only
        # requests whose inputs agree past the batch axis), then each gets its own rows back.
        joined = run_batched(self.session, self.outputs, feeds) if self.batching and len(feeds) > 1 else None
        per_request = joined if joined is not None else [self.session.run(self.outputs, feed) for feed in feeds]
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(name, _triton_array(value))
                                                       for name, value in zip(self.outputs, results, strict=True)])
            for results in per_request
        ]

    def _feed(self, request: Any, pb_utils: Any) -> dict[str, Any]:
        feed = {}
        for name, is_string in self.inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            if tensor is not None:
                array = tensor.as_numpy()
                feed[name] = _decoded(array) if is_string else array
        return feed


def run_batched(session: Any, outputs: Sequence[str], feeds: Sequence[Mapping[str, Any]]) -> list[list[Any]] | None:
    """One session run over all ``feeds`` joined on the batch axis, split back per feed; None when they cannot be
    joined (different inputs or shapes past the batch axis) or an output is not batch-major."""
    import numpy as np

    names = sorted(feeds[0])
    if not names or any(sorted(f) != names or any(np.ndim(v) == 0 for v in f.values()) for f in feeds):
        return None
    rows = [len(f[names[0]]) for f in feeds]
    for name in names:
        if any(f[name].shape[1:] != feeds[0][name].shape[1:] or len(f[name]) != n for f, n in zip(feeds, rows, strict=True)):
            return None
    results = session.run(list(outputs), {name: np.concatenate([f[name] for f in feeds]) for name in names})
    if any(np.ndim(value) == 0 or len(value) != sum(rows) for value in results):
        return None
    edges = np.cumsum(rows)[:-1]
    split = [np.split(np.asarray(value), edges) for value in results]
    return [[parts[i] for parts in split] for i in range(len(feeds))]


def _decoded(array: Any) -> Any:
    """Triton's BYTES elements as the str onnxruntime's string tensors take."""
    import numpy as np

    flat = [v.decode() if isinstance(v, bytes) else v for v in array.ravel()]
    return np.array(flat, dtype=object).reshape(array.shape)


def _triton_array(value: Any) -> Any:
    import numpy as np

    array = np.asarray(value)
    return array.astype(object) if array.dtype.kind == "U" else array
