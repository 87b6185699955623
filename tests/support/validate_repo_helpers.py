"""Build model repositories in a temporary folder for validate tests (importable by any test here).

``make_model(root, name, config_text, versions={1: {"model.py": "..."}})`` writes one model folder:
a version's value maps file names to contents (``str`` text, ``bytes`` binary, a ``dict`` for a
subfolder, ``{}`` for an empty one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union

from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Severity, ValidateOptions
from repo_builder.validate.report import Report

Tree = Mapping[str, Union[str, bytes, "Tree"]]

# The Python backend's add_sub example (server docs / python_backend/examples/add_sub), lightly trimmed.
ADD_SUB_MODEL_PY = '''\
import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.model_config = json.loads(args["model_config"])

    def execute(self, requests):
        responses = []
        for request in requests:
            in_0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            in_1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            out_0 = pb_utils.Tensor("OUTPUT0", (in_0 + in_1).astype(np.float32))
            out_1 = pb_utils.Tensor("OUTPUT1", (in_0 - in_1).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out_0, out_1]))
        return responses

    def finalize(self):
        pass
'''

ADD_SUB_CONFIG = '''\
name: "add_sub"
backend: "python"

input [
  {
    name: "INPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_FP32
    dims: [ 4 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]

instance_group [{ kind: KIND_CPU }]
'''


def write_tree(folder: Path, tree: Tree) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in tree.items():
        target = folder / name
        if isinstance(content, Mapping):
            write_tree(target, content)
        elif isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")


def make_model(
    root: Path,
    name: str,
    config_text: str | None = None,
    versions: Mapping[int | str, Tree] | None = None,
    files: Tree | None = None,
) -> Path:
    """Write ``root/name`` with ``config.pbtxt`` (unless None), version folders and extra model-folder files.

    ``versions`` defaults to one empty version folder ``1``.
    """
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    if config_text is not None:
        (folder / "config.pbtxt").write_text(config_text, encoding="utf-8")
    for version, tree in (versions if versions is not None else {1: {}}).items():
        write_tree(folder / str(version), tree)
    if files:
        write_tree(folder, files)
    return folder


def make_add_sub(root: Path, name: str = "add_sub") -> Path:
    """The Python backend's add_sub example model."""
    config = ADD_SUB_CONFIG.replace('name: "add_sub"', f'name: "{name}"')
    return make_model(root, name, config, {1: {"model.py": ADD_SUB_MODEL_PY}})


TensorDecl = tuple[str, int | str, Sequence[int | str | None]]


def onnx_bytes(
    inputs: Sequence[TensorDecl],
    outputs: Sequence[TensorDecl],
    initializers: Sequence[str] = (),
    ir_version: int | None = None,
) -> bytes:
    """A tiny valid ONNX model: each output is ``Identity`` of the first input (types/shapes as declared).

    A tensor is ``(name, elem_type, dims)``; ``elem_type`` is an ``onnx.TensorProto`` value or name, a dim is
    an int, a symbolic name, or None (unknown). ``initializers`` names graph inputs that also get a
    (scalar float) initializer.
    """
    import onnx
    from onnx import helper

    def info(decl: TensorDecl) -> Any:
        name, elem, dims = decl
        elem_id = getattr(onnx.TensorProto, elem) if isinstance(elem, str) else elem
        return helper.make_tensor_value_info(name, elem_id, list(dims))

    nodes = [helper.make_node("Identity", [inputs[0][0]], [o[0]]) for o in outputs]
    inits = [helper.make_tensor(n, onnx.TensorProto.FLOAT, [], [0.0]) for n in initializers]
    graph = helper.make_graph(nodes, "g", [info(i) for i in inputs], [info(o) for o in outputs], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    if ir_version is not None:
        model.ir_version = ir_version
    else:
        model.ir_version = 8
    return model.SerializeToString()


def onnx_config(name: str, max_batch_size: int, inputs: Sequence[tuple[str, str, Sequence[int]]],
                outputs: Sequence[tuple[str, str, Sequence[int]]], extra: str = "") -> str:
    """An onnxruntime config.pbtxt; tensors are ``(name, "TYPE_FP32", dims)``."""

    def block(kind: str, tensors: Sequence[tuple[str, str, Sequence[int]]]) -> str:
        if not tensors:
            return ""
        items = ",\n".join(
            f'  {{ name: "{n}" data_type: {t} dims: [ {", ".join(str(d) for d in dims)} ] }}' for n, t, dims in tensors
        )
        return f"{kind} [\n{items}\n]\n"

    return (
        f'name: "{name}"\nbackend: "onnxruntime"\nmax_batch_size: {max_batch_size}\n'
        + block("input", inputs)
        + block("output", outputs)
        + extra
    )


def validate(root: Path, **options: Any) -> Report:
    return validate_repository(root, ValidateOptions(**options))


def codes(report: Report, model: str | None = None, severity: Severity | None = None) -> set[str]:
    """The rule codes found (for one model, at one severity, when given)."""
    return {
        d.code
        for d in report.diagnostics
        if (model is None or d.model == model) and (severity is None or d.severity == severity)
    }


def messages(report: Report, code: str) -> list[str]:
    return [d.message for d in report.diagnostics if d.code == code]
