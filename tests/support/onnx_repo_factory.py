"""Tiny ONNX Runtime models (built with onnx.helper, no torch) and repositories around them."""

from __future__ import annotations

from pathlib import Path

from support.triton_repo_factory import Ensemble, Step, Tensor, write_ensemble, write_python_model


def write_scale_onnx(path: Path, *, batch: bool = True, width: int = 4) -> Path:
    """``Y = X * 3`` for FP32 ``X`` of shape [-1, width] (or [width] without a batch axis)."""
    import onnx
    from onnx import TensorProto, helper

    shape: list[int | str] = ["batch", width] if batch else [width]
    graph = helper.make_graph(
        [helper.make_node("Mul", ["X", "three"], ["Y"])],
        "scale",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)],
        [helper.make_tensor("three", TensorProto.FLOAT, [], [3.0])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def onnx_config(name: str, *, input_name: str = "X", data_type: str = "TYPE_FP32", dims: str = "[ 4 ]") -> str:
    return (
        f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        f'input [ {{ name: "{input_name}" data_type: {data_type} dims: {dims} }} ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )


def write_onnx_model(root: Path, name: str, config: str | None = None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.pbtxt").write_text(onnx_config(name) if config is None else config, encoding="utf-8")
    write_scale_onnx(folder / "1" / "model.onnx")
    return folder


def write_onnx_repository(root: Path) -> Path:
    """``scale`` (ONNX Runtime, Y = X * 3) behind ``front`` (Python, doubles) in the ensemble ``chain``."""
    from support.triton_repo_factory import DOUBLE_MODEL_PY

    root.mkdir(parents=True, exist_ok=True)
    write_python_model(root, "front", max_batch_size=8, model_py=DOUBLE_MODEL_PY)
    write_onnx_model(root, "scale")
    write_ensemble(
        root,
        Ensemble(
            "chain",
            inputs=(Tensor("IN"),),
            outputs=(Tensor("OUT"),),
            steps=(
                Step("front", (("INPUT0", "IN"),), (("OUTPUT0", "MID"),)),
                Step("scale", (("X", "MID"),), (("Y", "OUT"),)),
            ),
            max_batch_size=8,
        ),
    )
    return root
