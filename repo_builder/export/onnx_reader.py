"""Read what an ONNX file takes and returns, straight from the file (never from what we meant to write)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder import dtypes
from repo_builder.errors import UserError
from repo_builder.spec import Dim, TensorSpec


def _load(path: Path) -> Any:
    import onnx

    try:
        # Weights are not needed to read the graph's IO; skipping them keeps this fast for big models.
        return onnx.load(str(path), load_external_data=False)
    except FileNotFoundError:
        raise UserError(f"{path}: no such ONNX file") from None
    except Exception as exc:  # onnx raises DecodeError and others for garbage bytes
        raise UserError(f"{path}: not a readable ONNX file ({type(exc).__name__}: {exc})") from None


def _tensor_spec(value_info: Any, path: Path) -> TensorSpec:
    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise UserError(f"{path}: '{value_info.name}' is a {kind}, only tensors are supported")
    tensor_type = value_info.type.tensor_type
    dims: list[Dim] = []
    for index, dim in enumerate(tensor_type.shape.dim):
        if dim.HasField("dim_value") and dim.dim_value > 0:
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param") and dim.dim_param:
            dims.append(dim.dim_param)
        else:  # an unnamed dynamic axis: give it a stable name so the signature can still say "dynamic"
            dims.append(f"{value_info.name}_dim{index}")
    return TensorSpec(
        name=value_info.name, dtype=dtypes.from_onnx(tensor_type.elem_type).numpy, shape=tuple(dims)
    )


@dataclass(frozen=True)
class OnnxIO:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    opset: int  # the default-domain opset the file declares


def read_onnx_io(path: Path) -> OnnxIO:
    """The graph's real inputs (initializers excluded) and outputs as TensorSpecs, symbolic axes by name."""
    model = _load(path)
    initializers = {init.name for init in model.graph.initializer}
    inputs = tuple(_tensor_spec(v, path) for v in model.graph.input if v.name not in initializers)
    outputs = tuple(_tensor_spec(v, path) for v in model.graph.output)
    opsets = [int(e.version) for e in model.opset_import if e.domain in ("", "ai.onnx")]
    if not opsets:
        raise UserError(f"{path}: declares no default-domain opset")
    return OnnxIO(inputs=inputs, outputs=outputs, opset=opsets[0])


def check_onnx(path: Path) -> None:
    """Run ``onnx.checker`` (by path, so files with external data over 2 GB work too) with full checks."""
    import onnx

    try:
        onnx.checker.check_model(str(path), full_check=True)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path}: onnx.checker rejected the exported model: {first}") from None
