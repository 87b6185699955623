"""The one ONNX IO reader: a graph's inputs and outputs, read with ``onnx``'s own protobuf classes without
parsing weights.

The file is opened through the guarded reader (a regular file inside its root, at most 2 GiB), mapped and
walked field by field, so initializers (and their raw data) are skipped and a 2 GB model costs no more
memory than a small one; a hostile file is an ``OnnxReadError``, never a crash. Each file is read once per
process. Offline validate reads untrusted repositories with it (``validate/analysis/onnx_model.py``), export
reads what it just wrote (``export/onnx_reader.py``: the same tensors as ``TensorSpec``s).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from repo_builder.guarded_read import ONNX, UnsafeFile, open_repository_file
from repo_builder.lazy_pb2 import import_pb2


class OnnxReadError(Exception):
    """The file is not an ONNX model this reader (or ONNX Runtime) can load."""


class OnnxTensor(NamedTuple):
    name: str
    elem_type: int | None  # onnx.TensorProto.DataType value; None when not a tensor
    dims: tuple[int, ...] | None  # -1 for symbolic/unknown dims; None when the rank is unknown
    symbols: tuple[str, ...] = ()  # per dim: its dim_param ("" for a fixed or unnamed dim); () when the rank is unknown


class OnnxSignature(NamedTuple):
    inputs: tuple[OnnxTensor, ...]  # graph inputs that are not initializers (what ORT requires)
    overridable: tuple[OnnxTensor, ...]  # graph inputs that are initializers (IR >= 4): optional inputs
    outputs: tuple[OnnxTensor, ...]
    ir_version: int
    external_files: tuple[str, ...]  # locations of external data named by initializers
    opset: int | None = None  # the default-domain opset the model declares; None when it declares none


# --- protobuf wire format, just enough to skip what we do not need ---------------------------------


def _varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise OnnxReadError("truncated protobuf (varint runs past the end)")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise OnnxReadError("malformed protobuf varint")


def _fields(buf: Any, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, wire type, value start, value end or varint value) for each field in buf[start:end]."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise OnnxReadError("malformed protobuf (field number 0)")
        if wire == 0:
            value, pos = _varint(buf, pos, end)
            yield number, wire, value, value
        elif wire == 2:
            length, pos = _varint(buf, pos, end)
            if pos + length > end:
                raise OnnxReadError("truncated protobuf (a field runs past the end of the file)")
            yield number, wire, pos, pos + length
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise OnnxReadError(f"not an ONNX model (unsupported protobuf wire type {wire})")
        if pos > end:
            raise OnnxReadError("truncated protobuf")


def _initializer(buf: Any, start: int, end: int) -> tuple[str, list[str]]:
    """A TensorProto's name and external data locations, skipping its data."""
    name, locations, external = "", [], False
    for number, wire, a, b in _fields(buf, start, end):
        if number == 8 and wire == 2:
            name = bytes(buf[a:b]).decode("utf-8", "replace")
        elif number == 14 and wire == 0:
            external = a == 1  # TensorProto.EXTERNAL
        elif number == 13 and wire == 2:
            key = value = ""
            for n2, w2, a2, b2 in _fields(buf, a, b):
                if w2 == 2 and n2 in (1, 2):
                    text = bytes(buf[a2:b2]).decode("utf-8", "replace")
                    key, value = (text, value) if n2 == 1 else (key, text)
            if key == "location":
                locations.append(value)
    return name, (locations if external else [])


def _default_opset(buf: Any, start: int, end: int) -> int | None:
    """An OperatorSetIdProto's version when its domain is the default one ("" or "ai.onnx"), else None."""
    domain, version = "", None
    for number, wire, a, b in _fields(buf, start, end):
        if number == 1 and wire == 2:
            domain = bytes(buf[a:b]).decode("utf-8", "replace")
        elif number == 2 and wire == 0:
            version = a
    return version if domain in ("", "ai.onnx") else None


def _tensor(info: Any) -> OnnxTensor:
    name = info.name
    if not isinstance(name, str):  # proto2 hands back bytes for a name that is not valid UTF-8
        name = bytes(name).decode("utf-8", "replace")
    if not info.type.HasField("tensor_type"):
        return OnnxTensor(name, None, None)
    tt = info.type.tensor_type
    if not tt.HasField("shape"):
        return OnnxTensor(name, tt.elem_type, None)
    dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim)
    symbols = tuple(d.dim_param if d.HasField("dim_param") else "" for d in tt.shape.dim)
    return OnnxTensor(name, tt.elem_type, dims, symbols)


class _GraphParts:
    """What the graph fields hold: IO, initializer names and their external data locations."""

    def __init__(self) -> None:
        self.inputs: list[OnnxTensor] = []
        self.outputs: list[OnnxTensor] = []
        self.initializers: set[str] = set()
        self.external: list[str] = []

    def add_io(self, pb: Any, buf: Any, number: int, a: int, b: int) -> None:
        try:
            info = pb.ValueInfoProto.FromString(bytes(buf[a:b]))
        except Exception as exc:
            raise OnnxReadError(f"cannot decode a graph {'input' if number == 11 else 'output'}: {exc}") from exc
        (self.inputs if number == 11 else self.outputs).append(_tensor(info))

    def add_graph(self, pb: Any, buf: Any, start: int, end: int) -> None:
        for number, wire, a, b in _fields(buf, start, end):
            if wire != 2:
                continue
            if number in (11, 12):
                self.add_io(pb, buf, number, a, b)
            elif number == 5:
                name, locations = _initializer(buf, a, b)
                self.initializers.add(name)
                self.external.extend(locations)
            elif number == 15:  # sparse initializers
                self.initializers.update(_initializer(buf, a2, b2)[0] for n2, w2, a2, b2 in _fields(buf, a, b) if n2 == 1 and w2 == 2)


def parse_onnx_signature(buf: Any) -> OnnxSignature:
    """The IO of an ONNX ``ModelProto`` held in ``buf`` (bytes or mmap), without decoding weights."""
    pb = import_pb2("onnx.onnx_ml_pb2")
    ir_version, graphs, opset = 0, [], None
    for number, wire, a, b in _fields(buf, 0, len(buf)):
        if number == 1 and wire == 0:
            ir_version = a
        elif number == 7 and wire == 2:
            graphs.append((a, b))
        elif number == 8 and wire == 2 and opset is None:
            opset = _default_opset(buf, a, b)
    if not graphs:
        raise OnnxReadError("no graph in the file (is it an ONNX model?)")
    parts = _GraphParts()
    for gstart, gend in graphs:
        parts.add_graph(pb, buf, gstart, gend)
    required = tuple(t for t in parts.inputs if t.name not in parts.initializers)
    overridable = tuple(t for t in parts.inputs if t.name in parts.initializers) if ir_version >= 4 else ()
    return OnnxSignature(required, overridable, tuple(parts.outputs), ir_version, tuple(dict.fromkeys(parts.external)), opset)


_CACHE: dict[tuple[str, int, int], OnnxSignature | OnnxReadError] = {}


def read_onnx_signature(path: Path, root: Path | None = None) -> OnnxSignature:
    """Read (once per process and file version) the IO of an ONNX file inside ``root`` (default: its
    folder), opened through the guarded reader. Raises ``OnnxReadError``."""
    try:
        with open_repository_file(path, root if root is not None else path.parent, ONNX) as (fd, size):
            st = os.fstat(fd)
            key = (str(path), size, st.st_mtime_ns)
            cached = _CACHE.get(key)
            if cached is None:
                try:
                    cached = _read(fd, size, path.name)
                except OnnxReadError as exc:
                    cached = exc
                if len(_CACHE) > 4096:
                    _CACHE.clear()
                _CACHE[key] = cached
    except UnsafeFile as exc:
        raise OnnxReadError(str(exc)) from None
    if isinstance(cached, OnnxReadError):
        raise cached
    return cached


def _read(fd: int, size: int, name: str) -> OnnxSignature:
    try:
        if size < 1 << 20:
            return parse_onnx_signature(os.pread(fd, size, 0))
        import mmap

        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mapped:
            return parse_onnx_signature(mapped)
    except OSError as exc:
        raise OnnxReadError(f"cannot read {name}: {exc.strerror or exc}") from exc
    except (RecursionError, MemoryError) as exc:
        raise OnnxReadError("not an ONNX model (nesting too deep)") from exc
