"""Read what an ONNX file takes and returns, straight from the file (never from what we meant to write),
through the one ONNX IO reader; and run ``onnx.checker`` on an export."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from repo_builder import dtypes
from repo_builder.errors import UserError
from repo_builder.onnx_io import OnnxReadError, OnnxTensor, read_onnx_signature
from repo_builder.spec import Dim, TensorSpec


def _tensor_spec(tensor: OnnxTensor, path: Path) -> TensorSpec:
    if tensor.elem_type is None:
        raise UserError(f"{path}: '{tensor.name}' is not a tensor, only tensors are supported")
    if tensor.dims is None:
        raise UserError(f"{path}: '{tensor.name}' has no shape; export with a known rank")
    dims: list[Dim] = []
    for index, (size, symbol) in enumerate(zip(tensor.dims, tensor.symbols, strict=True)):
        if size > 0:
            dims.append(int(size))
        elif symbol:
            dims.append(symbol)
        else:  # an unnamed dynamic axis: give it a stable name so the signature can still say "dynamic"
            dims.append(f"{tensor.name}_dim{index}")
    return TensorSpec(name=tensor.name, dtype=dtypes.from_onnx(tensor.elem_type).numpy, shape=tuple(dims))


@dataclass(frozen=True)
class OnnxIO:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    opset: int  # the default-domain opset the file declares


def read_onnx_io(path: Path) -> OnnxIO:
    """The graph's real inputs (initializers excluded) and outputs as TensorSpecs, symbolic axes by name,
    read by the one ONNX IO reader (``repo_builder/onnx_io.py``: weights never parsed)."""
    if not path.is_file():
        raise UserError(f"{path}: no such ONNX file")
    try:
        signature = read_onnx_signature(path, path.parent)
    except OnnxReadError as exc:
        raise UserError(f"{path}: not a readable ONNX file ({exc})") from None
    inputs = tuple(_tensor_spec(t, path) for t in signature.inputs)
    outputs = tuple(_tensor_spec(t, path) for t in signature.outputs)
    if signature.opset is None:
        raise UserError(f"{path}: declares no default-domain opset")
    return OnnxIO(inputs=inputs, outputs=outputs, opset=signature.opset)


def check_onnx(path: Path) -> None:
    """Run ``onnx.checker`` (by path, so files with external data over 2 GB work too) with full checks."""
    import onnx

    try:
        onnx.checker.check_model(str(path), full_check=True)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path}: onnx.checker rejected the exported model: {first}") from None
