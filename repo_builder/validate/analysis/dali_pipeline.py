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
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_MAX_DEPTH_FIELDS = 1_000_000  # no pipeline has this many fields: a bound on hostile input


class NotAPipeline(ValueError):
    """The bytes are not a serialized DALI pipeline (a Python script, or damaged)."""


@dataclass(frozen=True)
class PipelineOp:
    name: str  # the operator's schema name, e.g. "decoders__Image", "ExternalSource"
    devices: tuple[str, ...]  # the devices of its outputs ("cpu", "gpu"; a mixed op's outputs are "gpu")
    outputs: tuple[str, ...]  # output tensor names


@dataclass(frozen=True)
class DaliPipeline:
    batch_size: int
    ops: tuple[PipelineOp, ...]
    outputs: tuple[str, ...]  # pipe_outputs in order (the backend matches config outputs by position)
    output_devices: tuple[str, ...]

    @property
    def inputs(self) -> tuple[str, ...]:
        """The external sources' names: the pipeline inputs the backend feeds (by name)."""
        return tuple(name for op in self.ops if op.name in EXTERNAL_SOURCE_OPS for name in op.outputs)

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


def _input_output(data: bytes) -> tuple[str, str]:
    name = device = ""
    for number, _, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 2:
            device = _text(value)
    return name, device


def _op(data: bytes) -> PipelineOp:
    name = ""
    outputs: list[tuple[str, str]] = []
    for number, wire, value in _fields(data):
        if number == 1:
            name = _text(value)
        elif number == 3 and wire == _LEN and isinstance(value, bytes):
            outputs.append(_input_output(value))
    if not name:
        raise NotAPipeline("an operator without a name")
    return PipelineOp(name, tuple(d for _, d in outputs), tuple(n for n, _ in outputs))


def read_dali_pipeline(data: bytes) -> DaliPipeline:
    """The pipeline's batch size, operators and outputs; NotAPipeline when ``data`` is not one."""
    batch_size: int | None = None
    ops: list[PipelineOp] = []
    outputs: list[tuple[str, str]] = []
    for number, wire, value in _fields(data):
        if number == 2 and wire == _VARINT and isinstance(value, int):
            batch_size = value
        elif number == 5 and wire == _LEN and isinstance(value, bytes):
            ops.append(_op(value))
        elif number == 7 and wire == _LEN and isinstance(value, bytes):
            outputs.append(_input_output(value))
    if batch_size is None or not ops or not outputs:
        raise NotAPipeline("no batch size, operators or outputs")
    return DaliPipeline(batch_size, tuple(ops), tuple(n for n, _ in outputs), tuple(d for _, d in outputs))
