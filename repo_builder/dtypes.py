"""The one table of tensor element types across numpy, torch, ONNX, TensorRT and Triton.

Every other module converts names through here, so a dtype can never be spelled two ways.
"""

from __future__ import annotations

from dataclasses import dataclass

from repo_builder.errors import UserError


@dataclass(frozen=True)
class DType:
    numpy: str  # numpy dtype name; "object" for Triton's BYTES/STRING
    torch: str | None  # torch attribute name (torch.float32 -> "float32")
    onnx: str  # onnx.TensorProto.DataType name
    onnx_id: int  # onnx.TensorProto.DataType value
    tensorrt: str | None  # tensorrt.DataType member name
    triton: str  # model config enum name (model_config.proto DataType)
    wire: str  # name on the wire (KServe v2 / tritonclient InferInput)
    size: int | None  # bytes per element; None for variable-size strings


DTYPES: tuple[DType, ...] = (
    DType("bool", "bool", "BOOL", 9, "BOOL", "TYPE_BOOL", "BOOL", 1),
    DType("uint8", "uint8", "UINT8", 2, "UINT8", "TYPE_UINT8", "UINT8", 1),
    DType("uint16", "uint16", "UINT16", 4, None, "TYPE_UINT16", "UINT16", 2),
    DType("uint32", "uint32", "UINT32", 12, None, "TYPE_UINT32", "UINT32", 4),
    DType("uint64", "uint64", "UINT64", 13, None, "TYPE_UINT64", "UINT64", 8),
    DType("int8", "int8", "INT8", 3, "INT8", "TYPE_INT8", "INT8", 1),
    DType("int16", "int16", "INT16", 5, None, "TYPE_INT16", "INT16", 2),
    DType("int32", "int32", "INT32", 6, "INT32", "TYPE_INT32", "INT32", 4),
    DType("int64", "int64", "INT64", 7, "INT64", "TYPE_INT64", "INT64", 8),
    DType("float16", "float16", "FLOAT16", 10, "HALF", "TYPE_FP16", "FP16", 2),
    DType("float32", "float32", "FLOAT", 1, "FLOAT", "TYPE_FP32", "FP32", 4),
    DType("float64", "float64", "DOUBLE", 11, None, "TYPE_FP64", "FP64", 8),
    # numpy has no bfloat16; Triton carries it as raw 2-byte values.
    DType("bfloat16", "bfloat16", "BFLOAT16", 16, "BF16", "TYPE_BF16", "BF16", 2),
    DType("object", None, "STRING", 8, None, "TYPE_STRING", "BYTES", None),
)

_BY: dict[str, dict[str, DType]] = {
    field: {getattr(d, field): d for d in DTYPES if getattr(d, field) is not None}
    for field in ("numpy", "torch", "onnx", "tensorrt", "triton", "wire")
}
_BY_ONNX_ID: dict[int, DType] = {d.onnx_id: d for d in DTYPES}


def _lookup(field: str, name: str) -> DType:
    try:
        return _BY[field][name]
    except KeyError:
        known = ", ".join(sorted(_BY[field]))
        raise UserError(f"unknown {field} data type '{name}' (known: {known})") from None


def from_numpy(name: str) -> DType:
    """From a numpy dtype name ('float32'); 'bytes', 'str' and 'object_' mean Triton strings."""
    if name in ("bytes", "bytes_", "str", "str_", "object_", "O"):
        name = "object"
    return _lookup("numpy", name)


def from_torch(name: str) -> DType:
    return _lookup("torch", name.removeprefix("torch."))


def from_onnx(name_or_id: str | int) -> DType:
    if isinstance(name_or_id, int):
        try:
            return _BY_ONNX_ID[name_or_id]
        except KeyError:
            raise UserError(f"unsupported ONNX element type {name_or_id}") from None
    return _lookup("onnx", name_or_id)


def from_tensorrt(name: str) -> DType:
    return _lookup("tensorrt", name.removeprefix("DataType."))


def from_triton(name: str) -> DType:
    """From a model-config name ('TYPE_FP32') or a wire name ('FP32')."""
    if name.startswith("TYPE_"):
        return _lookup("triton", name)
    return _lookup("wire", name)
