"""Small real ONNX models, signatures and TensorRT model folders for the compile tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from repo_builder.spec import Signature, TensorSpec, write_signature

IMAGE_SIGNATURE = Signature(
    inputs=(TensorSpec("input", "float32", ("batch", 3, 8, 8)),),
    outputs=(TensorSpec("logits", "float32", ("batch", 4)),),
)

TEXT_SIGNATURE = Signature(
    inputs=(
        TensorSpec("input_ids", "int64", ("batch", "sequence")),
        TensorSpec("attention_mask", "int64", ("batch", "sequence")),
    ),
    outputs=(TensorSpec("logits", "float32", ("batch", 2)),),
)


def make_image_onnx(path: Path) -> Path:
    """input [batch,3,8,8] -> ReduceMean over H,W -> [batch,3] -> MatMul [3,4] -> logits [batch,4]."""
    import numpy as np

    weight = helper.make_tensor("w", TensorProto.FLOAT, (3, 4), np.arange(12, dtype=np.float32).tolist())
    axes = helper.make_tensor("axes", TensorProto.INT64, (2,), [2, 3])
    nodes = [
        helper.make_node("ReduceMean", ["input", "axes"], ["pooled"], keepdims=0, name="pool"),
        helper.make_node("MatMul", ["pooled", "w"], ["logits"], name="head"),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_image",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])],
        initializer=[weight, axes],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    write_signature(IMAGE_SIGNATURE, path.parent)
    return path


TENSORRT_CONFIG = """\
# rendered for the tests the way build renders a tensorrt_plan model
name: "classifier"
platform: "tensorrt_plan"
max_batch_size: 8
input [
  {
    name: "input"
    data_type: TYPE_FP32
    dims: [ 3, 8, 8 ]
  }
]
output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
]
instance_group [ { kind: KIND_GPU count: 1 } ]
dynamic_batching { }
"""


def tree_digest(root: Path) -> dict[str, str]:
    """Every file and folder under root with its content hash: equal digests mean byte-for-byte equal trees."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out
