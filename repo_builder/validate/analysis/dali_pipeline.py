"""What a serialized DALI pipeline (``model.dali``) declares, read from its protobuf wire format alone.

Offline validate never deserializes a pipeline with DALI (that builds operators and may load plugins): this
reads only the fields the DALI backend's checks use, from DALI's ``dali/pipeline/proto/dali.proto``
(``PipelineDef``: ``batch_size`` = 2, ``op`` = 5, ``pipe_outputs`` = 7; ``OpDef``: ``name`` = 1, ``input`` = 2,
``output`` = 3; ``InputOutput``: ``name`` = 1, ``device`` = 2). A file that does not parse is not necessarily
wrong: the backend also loads ``model.dali`` as a Python script with ``@autoserialize`` (dali_backend
src/dali_model.h ``AutoserializeModelProvider``), so such a file is "not read", never a finding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

EXTERNAL_SOURCE_OPS = frozenset({"ExternalSource", "_ExternalSource"})
# DALIDataType (dali/core/dali_data_type.h) -> the config's data_type, as dali_backend's to_triton_config.
DALI_TO_TRITON = {0: "TYPE_UINT8", 1: "TYPE_UINT16", 2: "TYPE_UINT32", 3: "TYPE_UINT64", 4: "TYPE_INT8", 5: "TYPE_INT16",
                  6: "TYPE_INT32", 7: "TYPE_INT64", 8: "TYPE_FP16", 9: "TYPE_FP32", 10: "TYPE_FP64", 11: "TYPE_BOOL"}
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_MAX_DEPTH_FIELDS = 1_000_000  # no pipeline has this many fields: a bound on hostile input


class NotAPipeline(ValueError):
    """The bytes are not a serialized DALI pipeline (a Python script, or damaged)."""


@dataclass(frozen=True)
class PipelineTensor:
    """A pipeline input (external source) or output with what the pipeline declares of it."""

    name: str
    dtype: str | None = None  # the Triton type name; None: not declared (the backend then checks nothing)
    ndim: int | None = None  # sample dimensions; None: not declared


@dataclass(frozen=True)
class PipelineOp:
    name: str  # the operator's schema name, e.g. "decoders__Image", "ExternalSource"
    devices: tuple[str, ...]  # the devices of its outputs ("cpu", "gpu"; a mixed op's outputs are "gpu")
    outputs: tuple[str, ...]  # output tensor names
    declared: PipelineTensor | None = None  # an external source's name, dtype and ndim arguments


@dataclass(frozen=True)
class DaliPipeline:
    batch_size: int
    ops: tuple[PipelineOp, ...]
    outputs: tuple[str, ...]  # pipe_outputs in order (the backend matches config outputs by position)
    output_devices: tuple[str, ...]
    output_tensors: tuple[PipelineTensor, ...] = ()  # the same, with their declared dtype and ndim

    @property
    def inputs(self) -> tuple[str, ...]:
        """The external sources' names: the pipeline inputs the backend feeds (by name)."""
        return tuple(name for op in self.ops if op.name in EXTERNAL_SOURCE_OPS for name in op.outputs)

    @property
    def input_tensors(self) -> dict[str, PipelineTensor]:
        return {op.declared.name: op.declared for op in self.ops if op.declared is not None}

    @property
    def op_names(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.ops)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise NotAPipeline("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of one message; groups and unknown wire types are refused."""
    pos, count = 0, 0
    while pos < len(data):
        count += 1
        if count > _MAX_DEPTH_FIELDS:
            raise NotAPipeline("too many fields")
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise NotAPipeline("field number 0")
        if wire == _VARINT:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == _LEN:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise NotAPipeline("truncated field")
            yield number, wire, data[pos:pos + length]
            pos += length
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
            if pos + size > len(data):
                raise NotAPipeline("truncated field")
            yield number, wire, data[pos:pos + size]
            pos += size
        else:
            raise NotAPipeline(f"wire type {wire}")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise NotAPipeline("expected a string")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise NotAPipeline("a name is not UTF-8") from None


def _signed(value: int | bytes) -> int | None:
    """A varint read as int64 (protobuf writes -1 as 2**64 - 1)."""
    if not isinstance(value, int):
        return None
    return value - (1 << 64) if value >= 1 << 63 else value


def _declared(name: str, dtype: int | None, ndim: int | None) -> PipelineTensor:
    return PipelineTensor(name, DALI_TO_TRITON.get(dtype) if dtype is not None else None,
                          ndim if ndim is not None and ndim >= 0 else None)


def _input_output(data: bytes) -> tuple[str, str, PipelineTensor]:
    name = device = ""
    dtype = ndim = None
    for number, _, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 2:
            device = _text(value)
        elif number == 5:
            dtype = _signed(value)
        elif number == 6:
            ndim = _signed(value)
    return name, device, _declared(name, dtype, ndim)


def _argument(data: bytes) -> tuple[str, int | None]:
    """An operator argument's name and its first int (the external source's dtype and ndim are ints)."""
    name, first = "", None
    for number, wire, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 4 and first is None:
            if wire == _VARINT:
                first = _signed(value)
            elif wire == _LEN and isinstance(value, bytes) and value:  # packed
                first = _signed(_varint(value, 0)[0])
    return name, first


def _op(data: bytes) -> PipelineOp:
    name = ""
    outputs: list[tuple[str, str, PipelineTensor]] = []
    args: dict[str, int | None] = {}
    for number, wire, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 3 and wire == _LEN and isinstance(value, bytes):
            outputs.append(_input_output(value))
        elif number == 4 and wire == _LEN and isinstance(value, bytes):
            key, first = _argument(value)
            args[key] = first
    if not name:
        raise NotAPipeline("an operator without a name")
    declared = None
    if name in EXTERNAL_SOURCE_OPS and outputs:
        declared = _declared(outputs[0][0], args.get("dtype"), args.get("ndim"))
    return PipelineOp(name, tuple(d for _, d, _ in outputs), tuple(n for n, _, _ in outputs), declared)


def read_dali_pipeline(data: bytes) -> DaliPipeline:
    """The pipeline's batch size, operators and outputs; NotAPipeline when ``data`` is not one."""
    batch_size: int | None = None
    ops: list[PipelineOp] = []
    outputs: list[tuple[str, str, PipelineTensor]] = []
    for number, wire, value in _fields(data):
        if number == 2 and wire == _VARINT and isinstance(value, int):
            batch_size = value
        elif number == 5 and wire == _LEN and isinstance(value, bytes):
            ops.append(_op(value))
        elif number == 7 and wire == _LEN and isinstance(value, bytes):
            outputs.append(_input_output(value))
    if batch_size is None or not ops or not outputs:
        raise NotAPipeline("no batch size, operators or outputs")
    return DaliPipeline(batch_size, tuple(ops), tuple(n for n, _, _ in outputs), tuple(d for _, d, _ in outputs),
                        tuple(t for _, _, t in outputs))
