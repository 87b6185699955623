"""Write small Triton repositories of Python-backend models and ensembles for the tests in this folder."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# Answers every request with outputs of the configured data types and shapes (ones, or b"ok" strings),
# so any config whose IO the server accepts can also be inferred through an ensemble.
GENERIC_MODEL_PY = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.batching = int(config.get("max_batch_size", 0)) > 0
        self.inputs = [i["name"] for i in config.get("input", [])]
        self.outputs = [
            (o["name"], pb_utils.triton_string_to_numpy(o["data_type"]), [int(d) for d in o.get("dims", [])])
            for o in config.get("output", [])
        ]

    def execute(self, requests):
        responses = []
        for request in requests:
            batch = []
            if self.batching:
                batch = [1]
                for name in self.inputs:
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    if tensor is not None:
                        batch = [tensor.as_numpy().shape[0]]
                        break
            tensors = []
            for name, dtype, dims in self.outputs:
                shape = batch + [1 if d < 0 else d for d in dims]
                if dtype == np.object_:
                    data = np.full(shape, b"ok", dtype=np.object_)
                else:
                    data = np.ones(shape, dtype=dtype)
                tensors.append(pb_utils.Tensor(name, data))
            responses.append(pb_utils.InferenceResponse(tensors))
        return responses
"""

# Doubles INPUT0 into OUTPUT0: a known answer to check inference against.
DOUBLE_MODEL_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 2)]))
        return out
"""

# Reports where the stub's Python found the environment's packages.
ENVIRONMENT_MODEL_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        import sys

        import onnxruntime
        import PIL
        import tokenizers

        found = [m.__file__ for m in (np, onnxruntime, tokenizers, PIL)] + [sys.prefix, np.__version__]
        data = np.array([s.encode() for s in found], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("PATHS", data)]) for _ in requests]
"""



def slow_model_py(seconds: float) -> str:
    """A Python model whose ``initialize`` sleeps ``seconds``: a load in progress, or one past a timeout."""
    return f"""
import time


class TritonPythonModel:
    def initialize(self, args):
        time.sleep({seconds:g})

    def execute(self, requests):
        return []
"""


@dataclass(frozen=True)
class Tensor:
    name: str
    data_type: str = "TYPE_FP32"
    dims: tuple[int, ...] = (4,)

    def pbtxt(self) -> str:
        return (
            f'{{ name: "{self.name}" data_type: {self.data_type} dims: [{", ".join(map(str, self.dims))}] }}'
        )


def io_block(inputs: tuple[Tensor, ...], outputs: tuple[Tensor, ...]) -> str:
    text = ""
    if inputs:
        text += "input [\n  " + ",\n  ".join(t.pbtxt() for t in inputs) + "\n]\n"
    if outputs:
        text += "output [\n  " + ",\n  ".join(t.pbtxt() for t in outputs) + "\n]\n"
    return text


def write_python_model(
    root: Path,
    name: str,
    *,
    inputs: tuple[Tensor, ...] = (Tensor("INPUT0"),),
    outputs: tuple[Tensor, ...] = (Tensor("OUTPUT0"),),
    max_batch_size: int = 0,
    extra: str = "",
    model_py: str | None = GENERIC_MODEL_PY,
    versions: tuple[str, ...] = ("1",),
    config: str | None = None,
) -> Path:
    """A Python-backend model; ``config`` replaces the generated config.pbtxt text when given."""
    folder = root / name
    folder.mkdir(parents=True)
    if config is None:
        config = f'backend: "python"\nmax_batch_size: {max_batch_size}\n' + io_block(inputs, outputs) + extra
    (folder / "config.pbtxt").write_text(config, encoding="utf-8")
    for v in versions:
        (folder / v).mkdir()
        if model_py is not None:
            (folder / v / "model.py").write_text(model_py, encoding="utf-8")
    return folder


@dataclass(frozen=True)
class Step:
    model: str
    input_map: tuple[tuple[str, str], ...]  # (member input, ensemble tensor)
    output_map: tuple[tuple[str, str], ...]  # (member output, ensemble tensor)
    version: int | None = -1  # None leaves model_version out

    def pbtxt(self) -> str:
        version = "" if self.version is None else f" model_version: {self.version}"
        maps = "".join(f' input_map {{ key: "{k}" value: "{v}" }}' for k, v in self.input_map)
        maps += "".join(f' output_map {{ key: "{k}" value: "{v}" }}' for k, v in self.output_map)
        return f'{{ model_name: "{self.model}"{version}{maps} }}'


@dataclass(frozen=True)
class Ensemble:
    name: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    steps: tuple[Step, ...]
    max_batch_size: int = 0
    extra: str = ""
    versions: tuple[str, ...] = ("1",)
    placeholder: bool = True
    notes: tuple[str, ...] = field(default=())

    def config_text(self) -> str:
        steps = ",\n    ".join(s.pbtxt() for s in self.steps)
        return (
            f'platform: "ensemble"\nmax_batch_size: {self.max_batch_size}\n'
            + io_block(self.inputs, self.outputs)
            + self.extra
            + f"ensemble_scheduling {{\n  step [\n    {steps}\n  ]\n}}\n"
        )


def write_ensemble(root: Path, ensemble: Ensemble) -> Path:
    folder = root / ensemble.name
    folder.mkdir(parents=True)
    (folder / "config.pbtxt").write_text(ensemble.config_text(), encoding="utf-8")
    for v in ensemble.versions:
        (folder / v).mkdir()
        if ensemble.placeholder:
            (folder / v / ".keep").write_text("", encoding="utf-8")
    return folder


def write_double_repository(root: Path) -> Path:
    """``double`` (INPUT0 * 2, FP32 [4], batching up to 8) and ``pipeline``, an ensemble over it."""
    root.mkdir(parents=True, exist_ok=True)
    write_python_model(root, "double", max_batch_size=8, model_py=DOUBLE_MODEL_PY)
    write_ensemble(
        root,
        Ensemble(
            "pipeline",
            inputs=(Tensor("X"),),
            outputs=(Tensor("Y"),),
            steps=(Step("double", (("INPUT0", "X"),), (("OUTPUT0", "Y"),)),),
            max_batch_size=8,
        ),
    )
    return root


def group_alive(pgid: int) -> bool:
    """True while any process of the group (the server and its Python-backend stubs) is left."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
