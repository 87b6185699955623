"""Rules RB6xx: an ONNX Runtime model's config against the ONNX graph, as Triton's ONNX Runtime backend checks.

The graph's inputs and outputs are read with ``onnx``'s own protobuf classes, but without parsing the
weights: the file is mapped and walked field by field, so initializers (and their raw data) are skipped
and a 2 GB model costs no more memory than a small one. Each file is read once per process.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule
from repo_builder.validate.rules.layout import version_folder, versions_to_load
from repo_builder.validate.rules.platform import resolve_backend

# Triton's default --backend-config=default-max-batch-size, used when auto-complete finds batching.
DEFAULT_MAX_BATCH_SIZE = 4
_SEQUENCE_CONTROLS = (
    "CONTROL_SEQUENCE_START",
    "CONTROL_SEQUENCE_END",
    "CONTROL_SEQUENCE_READY",
    "CONTROL_SEQUENCE_CORRID",
)


class OnnxReadError(Exception):
    """The file is not an ONNX model this reader (or ONNX Runtime) can load."""


class OnnxTensor(NamedTuple):
    name: str
    elem_type: int | None  # onnx.TensorProto.DataType value; None when not a tensor
    dims: tuple[int, ...] | None  # -1 for symbolic/unknown dims; None when the rank is unknown


class OnnxSignature(NamedTuple):
    inputs: tuple[OnnxTensor, ...]  # graph inputs that are not initializers (what ORT requires)
    overridable: tuple[OnnxTensor, ...]  # graph inputs that are initializers (IR >= 4): optional inputs
    outputs: tuple[OnnxTensor, ...]
    ir_version: int
    external_files: tuple[str, ...]  # locations of external data named by initializers


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
    return OnnxTensor(name, tt.elem_type, dims)


def parse_onnx_signature(buf: Any) -> OnnxSignature:
    """The IO of an ONNX ``ModelProto`` held in ``buf`` (bytes or mmap), without decoding weights."""
    from repo_builder.validate.scan import import_pb2

    pb = import_pb2("onnx.onnx_ml_pb2")
    end = len(buf)
    ir_version, graphs = 0, []
    for number, wire, a, b in _fields(buf, 0, end):
        if number == 1 and wire == 0:
            ir_version = a
        elif number == 7 and wire == 2:
            graphs.append((a, b))
    if not graphs:
        raise OnnxReadError("no graph in the file (is it an ONNX model?)")
    inputs, outputs, initializers, external = [], [], set(), []
    for gstart, gend in graphs:
        for number, wire, a, b in _fields(buf, gstart, gend):
            if wire != 2:
                continue
            if number in (11, 12):
                try:
                    info = pb.ValueInfoProto.FromString(bytes(buf[a:b]))
                except Exception as exc:
                    raise OnnxReadError(
                        f"cannot decode a graph {'input' if number == 11 else 'output'}: {exc}"
                    ) from exc
                (inputs if number == 11 else outputs).append(_tensor(info))
            elif number == 5:
                name, locations = _initializer(buf, a, b)
                initializers.add(name)
                external.extend(locations)
            elif number == 15:
                for n2, w2, a2, b2 in _fields(buf, a, b):
                    if n2 == 1 and w2 == 2:
                        initializers.add(_initializer(buf, a2, b2)[0])
    required = tuple(t for t in inputs if t.name not in initializers)
    overridable = tuple(t for t in inputs if t.name in initializers) if ir_version >= 4 else ()
    return OnnxSignature(required, overridable, tuple(outputs), ir_version, tuple(dict.fromkeys(external)))


_CACHE: dict[tuple[str, int, int], OnnxSignature | OnnxReadError] = {}


def read_onnx_signature(path: Path) -> OnnxSignature:
    """Read (once per process and file version) an ONNX file's IO. Raises ``OnnxReadError``."""
    try:
        st = path.stat()
    except OSError as exc:
        raise OnnxReadError(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(st.st_mode):  # a pipe would block the read, a device never end
        raise OnnxReadError(f"{path.name} is not a regular file")
    key = (str(path), st.st_size, st.st_mtime_ns)
    cached = _CACHE.get(key)
    if cached is None:
        try:
            cached = _read(path, st.st_size)
        except OnnxReadError as exc:
            cached = exc
        if len(_CACHE) > 4096:
            _CACHE.clear()
        _CACHE[key] = cached
    if isinstance(cached, OnnxReadError):
        raise cached
    return cached


def _read(path: Path, size: int) -> OnnxSignature:
    try:
        with open(path, "rb") as fh:
            if size < 1 << 20:
                return parse_onnx_signature(fh.read())
            import mmap

            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                return parse_onnx_signature(mapped)
    except OSError as exc:
        raise OnnxReadError(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    except RecursionError as exc:
        raise OnnxReadError("not an ONNX model (nesting too deep)") from exc


# --- what the backend compares ---------------------------------------------------------------------


def _shape(dims: tuple[int, ...] | list[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _triton_type(elem_type: int | None) -> str:
    from repo_builder.dtypes import _BY_ONNX_ID

    dtype = _BY_ONNX_ID.get(elem_type) if elem_type is not None else None
    return dtype.triton if dtype is not None else "TYPE_INVALID"


def _config_type(io: Any) -> str:
    return io.DESCRIPTOR.fields_by_name["data_type"].enum_type.values_by_number[io.data_type].name


class _Problem(NamedTuple):
    code: str
    message: str
    hint: str | None = None
    severity: Severity | None = None


def _compare_dims(
    model: str, tensor: str, shape: tuple[int, ...], dims: list[int], mbs: int, exact: bool
) -> _Problem | None:
    """The backend's CompareDimsSupported: the config's dims (plus the batch dim) against the graph's."""
    if mbs > 0:
        if not shape or shape[0] != -1:
            return _Problem(
                "RB605",
                f"model '{model}', tensor '{tensor}': for the model to support batching the shape should have at "
                f"least 1 dimension and the first dimension must be -1; but shape expected by the model is "
                f"{_shape(shape)}",
                "set max_batch_size: 0 (the graph has no batch dimension) or export the model with a dynamic first axis",
            )
        full = [-1, *dims]
        ok = len(shape) == len(full) and all(
            m == c for m, c in zip(shape, full, strict=True) if exact or m != -1
        )
        if not ok:
            return _Problem(
                "RB605",
                f"model '{model}', tensor '{tensor}': the model expects {len(shape)} dimensions (shape "
                f"{_shape(shape)}) but the model configuration specifies {len(full)} dimensions (an initial "
                f"batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making "
                f"complete shape {_shape(full)})",
                f"with max_batch_size > 0, dims leave out the batch dimension: dims: {_shape(list(shape[1:]))}",
            )
        return None
    ok = len(shape) == len(dims) and all(m == c for m, c in zip(shape, dims, strict=True) if exact or m != -1)
    if not ok:
        return _Problem(
            "RB605",
            f"model '{model}', tensor '{tensor}': the model expects {len(shape)} dimensions (shape "
            f"{_shape(shape)}) but the model configuration specifies {len(dims)} dimensions (shape {_shape(dims)})",
            f"with max_batch_size: 0, dims are the full shape: dims: {_shape(list(shape))}",
        )
    return None


def _io_dims(io: Any) -> list[int]:
    return list(io.reshape.shape) if io.HasField("reshape") else list(io.dims)


def _well_formed(io: Any) -> bool:
    # Malformed entries (no name, type or dims; dims of 0 or below -1) are the config rules' business.
    if not io.name or io.data_type == 0 or not (len(io.dims) > 0 or io.HasField("reshape")):
        return False
    return all(d >= 1 or d == -1 for d in _io_dims(io))


def _sequence_inputs(config: Any) -> int:
    if not config.HasField("sequence_batching"):
        return 0
    seq = config.sequence_batching
    names = {seq.Control.Kind.Name(c.kind) for ci in seq.control_input for c in ci.control}
    return sum(1 for kind in _SEQUENCE_CONTROLS if kind in names) + len(seq.state)


def compare_onnx(name: str, config: Any, sig: OnnxSignature, strict: bool) -> list[_Problem]:
    """Every problem the ONNX Runtime backend would find between ``config`` and the graph ``sig``.

    Triton stops at the first; we report them all.
    """
    problems: list[_Problem] = []
    mbs = config.max_batch_size
    inputs, outputs = list(config.input), list(config.output)
    have_inputs = len(inputs) + len(config.batch_input) > 0
    if not strict and not (have_inputs and outputs):
        # The backend's auto-complete: decide batching from the graph, fill in missing inputs/outputs.
        tensors = [*sig.inputs, *sig.outputs]
        batching = all(t.dims is not None and len(t.dims) > 0 and t.dims[0] == -1 for t in tensors)
        if batching and mbs == 0:
            mbs = DEFAULT_MAX_BATCH_SIZE
            problems.append(
                _Problem(
                    "RB607",
                    f"autofilled max_batch_size to {mbs} for model '{name}' since batching is supporrted but no "
                    "max_batch_size is specified in model configuration. Must specify max_batch_size to utilize "
                    "autofill with a larger max batch size",
                    "set max_batch_size explicitly (0 to turn batching off)",
                )
            )
        elif not batching and mbs != 0:
            problems.append(
                _Problem(
                    "RB606",
                    f"autofill failed for model '{name}': model does not support batching while non-zero "
                    "max_batch_size is specified",
                    "the graph's first dimension is not dynamic on every input and output: set max_batch_size: 0",
                )
            )
            return problems
        # Missing inputs/outputs are filled from the graph: consistent by construction, nothing to check.
    # Input count (ORT counts non-initializer graph inputs; optional config inputs may be initializers).
    # Without auto-complete an empty input list is compared too ("configuration expects 0 inputs").
    if have_inputs or strict:
        expected = (
            sum(1 for io in inputs if not io.optional) + len(config.batch_input) + _sequence_inputs(config)
        )
        if expected != len(sig.inputs):
            problems.append(
                _Problem(
                    "RB602",
                    f"unable to load model '{name}', configuration expects {expected} inputs, model provides "
                    f"{len(sig.inputs)}",
                    "the graph's inputs are: " + (", ".join(t.name for t in sig.inputs) or "(none)"),
                )
            )
    by_name = {t.name: t for t in (*sig.inputs, *sig.overridable)}
    allowed = ", ".join(sorted(by_name, key=os.fsencode))
    for io in inputs:
        if not _well_formed(io):
            continue
        if io.optional and mbs != 0:
            problems.append(
                _Problem(
                    "RB606",
                    f"unable to load model '{name}', optional input '{io.name}' is not supported for models that "
                    "support batching",
                    "set max_batch_size: 0 or make the input required",
                )
            )
            continue
        tensor = by_name.get(io.name)
        if tensor is None:
            problems.append(
                _Problem(
                    "RB603",
                    f"unexpected inference input '{io.name}', allowed inputs are: {allowed}",
                    "use the graph's input names",
                )
            )
            continue
        problems.extend(_compare_tensor(name, "input", io, tensor, mbs, exact=False))
    out_by_name = {t.name: t for t in sig.outputs}
    allowed_out = ", ".join(sorted(out_by_name, key=os.fsencode))
    batch_targets = {t for bo in config.batch_output for t in bo.target_name}
    for io in outputs:
        if not _well_formed(io):
            continue
        tensor = out_by_name.get(io.name)
        if tensor is None:
            problems.append(
                _Problem(
                    "RB603",
                    f"unexpected inference output '{io.name}', allowed outputs are: {allowed_out}",
                    "use the graph's output names",
                )
            )
            continue
        if io.name in batch_targets:
            problems.extend(
                p for p in _compare_tensor(name, "output", io, tensor, mbs, exact=True) if p.code != "RB605"
            )
            continue
        problems.extend(_compare_tensor(name, "output", io, tensor, mbs, exact=True))
    return problems


def _compare_tensor(
    name: str, kind: str, io: Any, tensor: OnnxTensor, mbs: int, exact: bool
) -> list[_Problem]:
    out: list[_Problem] = []
    expected = _config_type(io)
    actual = _triton_type(tensor.elem_type)
    if tensor.elem_type is not None and expected != actual:
        out.append(
            _Problem(
                "RB604",
                f"unable to load model '{name}', configuration expects datatype {expected} for {kind} "
                f"'{io.name}', model provides {actual}",
                f"set data_type: {actual}",
            )
        )
    if tensor.dims is None:
        return out  # rank unknown in the graph: nothing to compare
    dims = _io_dims(io)
    if kind == "input" and io.allow_ragged_batch:
        if tensor.dims != (-1,):
            out.append(
                _Problem(
                    "RB605",
                    f"unable to load model '{name}', configuration expects model provides input with shape [-1]  "
                    f"for ragged input '{io.name}', model provides {_shape(tensor.dims)}",
                    "a ragged input must be 1-D and dynamic in the graph",
                )
            )
        return out
    if len(tensor.dims) == 0:
        if any(d != 1 for d in dims):
            out.append(
                _Problem(
                    "RB605",
                    f"unable to load model '{name}', scalar tensor '{io.name}', should only provide 1 in the model "
                    f"configuration when the model doesn't support batching. Model configuration provided: "
                    f"{_shape(dims)}.",
                    "a scalar in the graph is dims: [1] in the config",
                )
            )
        return out
    problem = _compare_dims(name, io.name, tensor.dims, dims, mbs, exact)
    if problem is not None:
        out.append(problem)
    return out


# --- rules -----------------------------------------------------------------------------------------


class _Checked(NamedTuple):
    version: int
    path: Path
    problems: tuple[_Problem, ...]


def _onnx_path(model: ModelEntry, number: int, filename: str) -> Path | None:
    v = version_folder(model, number)
    entry = v.entry(filename) if v is not None else None
    if v is None or entry is None:
        return None  # RB405 reports the missing file
    path = v.path / filename
    if entry.is_dir:
        path = path / "model.onnx"
        if not path.is_file():
            return None
    elif entry.size is None:
        return None
    return path


def _not_downloaded(model: ModelEntry, number: int, filename: str, path: Path) -> int | None:
    """Size of a remote file that was listed but not fetched (a zero-byte placeholder), else None."""
    v = version_folder(model, number)
    entry = v.entry(filename) if v is not None else None
    if entry is None or entry.is_dir or not entry.size:
        return None
    try:
        return entry.size if path.stat().st_size != entry.size else None
    except OSError:
        return None


def check_onnx_model(model: ModelEntry, ctx: RuleContext) -> tuple[_Checked, ...]:
    """All ONNX findings of one model, computed once and shared by the RB6xx rules."""
    key = (_check, ctx.options.strict)  # the only part of the run the answer depends on
    results = model.facts.get(key)
    if results is None:
        results = model.facts[key] = tuple(_check(model, ctx))
    return results


def _check(model: ModelEntry, ctx: RuleContext) -> Iterator[_Checked]:
    if model.config is None and (model.has_config_file or ctx.options.strict):
        return
    resolved = resolve_backend(model)
    if resolved.backend != "onnxruntime" or resolved.problem is not None:
        return
    filename = resolved.default_model_filename or "model.onnx"
    for number in versions_to_load(model):
        path = _onnx_path(model, number, filename)
        if path is None:
            continue
        size = _not_downloaded(model, number, filename, path)
        if size is not None:
            yield _Checked(
                number,
                path,
                (
                    _Problem(
                        "RB601",
                        f"needs the model file: {filename} ({size} bytes) was not downloaded, so its "
                        "inputs and outputs are not checked",
                        "raise --max-download or validate a local copy",
                        Severity.INFO,
                    ),
                ),
            )
            continue
        try:
            sig = read_onnx_signature(path)
        except OnnxReadError as exc:
            yield _Checked(
                number,
                path,
                (
                    _Problem(
                        "RB601",
                        f"cannot load {filename}: {exc}",
                        "re-export the model; the file is damaged or not ONNX",
                    ),
                ),
            )
            continue
        problems: list[_Problem] = []
        for location in sig.external_files:
            target = (path.parent / location).resolve()
            if not target.is_file():
                problems.append(
                    _Problem(
                        "RB601",
                        f"{filename} keeps weights in external data file '{location}', which is missing",
                        f"put '{location}' beside {filename} (save the model as a model.onnx/ folder)",
                    )
                )
        if model.config is not None:
            problems.extend(compare_onnx(model.name, model.config, sig, ctx.options.strict))
        if problems:
            yield _Checked(number, path, tuple(problems))


def _findings(code: str, model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    for checked in check_onnx_model(model, ctx):
        for p in checked.problems:
            if p.code == code:
                path = checked.path if code == "RB601" else None
                yield Finding(p.message, path=path, hint=p.hint, version=checked.version, severity=p.severity)


@rule("RB601", "onnx-model-unreadable")
def check_onnx_unreadable(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """The ONNX file cannot be read as an ONNX model, or its external weights are missing.

    ONNX Runtime fails to create a session from a damaged or truncated file, a file that is not ONNX, or a
    model whose initializers point at external data files that are not beside it.

    Fails: ``1/model.onnx`` holding an HTML error page saved by a failed download.

    Passes: ``1/model.onnx`` written by ``torch.onnx.export`` (and its ``.data`` file beside it).
    """
    yield from _findings("RB601", model, ctx)


@rule("RB602", "onnx-input-count")
def check_onnx_input_count(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """The config declares a different number of inputs than the graph requires.

    The backend counts the config's inputs (without optional ones, plus batch inputs and sequence
    control/state inputs) against the graph's inputs that are not initializers.

    Fails: a config with ``INPUT0`` only for a graph with ``INPUT0`` and ``INPUT1``.

    Passes: a config declaring both.
    """
    yield from _findings("RB602", model, ctx)


@rule("RB603", "onnx-tensor-unknown")
def check_onnx_tensor_unknown(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A config input or output has a name the ONNX graph does not have.

    Fails: ``input [{ name: "input" ... }]`` for a graph whose input is ``input_ids``.

    Passes: ``name: "input_ids"``.
    """
    yield from _findings("RB603", model, ctx)


@rule("RB604", "onnx-dtype-mismatch")
def check_onnx_dtype_mismatch(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A config tensor's ``data_type`` differs from the graph's element type.

    Fails: ``data_type: TYPE_FP32`` for an ``int64`` graph input.

    Passes: ``data_type: TYPE_INT64``.
    """
    yield from _findings("RB604", model, ctx)


@rule("RB605", "onnx-dims-mismatch")
def check_onnx_dims_mismatch(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A config tensor's ``dims`` (or ``reshape``) do not fit the graph's shape.

    With ``max_batch_size > 0`` the graph's first dimension must be dynamic (the batch) and ``dims`` give
    the rest; with ``max_batch_size: 0`` ``dims`` give the whole shape. A dynamic graph dimension accepts
    any input size; outputs must match exactly (``-1`` where the graph is dynamic). A scalar graph
    tensor is ``dims: [1]``; a ragged input must be ``[-1]`` in the graph.

    Fails: ``max_batch_size: 8`` and ``dims: [1, 16]`` for a graph input of shape ``[batch, 16]``.

    Passes: ``max_batch_size: 8`` and ``dims: [16]``.
    """
    yield from _findings("RB605", model, ctx)


@rule("RB606", "onnx-batching-unsupported")
def check_onnx_batching_unsupported(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """The config asks for batching the graph cannot do.

    While auto-completing a config that lacks inputs or outputs, the backend refuses a non-zero
    ``max_batch_size`` when not every graph input and output has a dynamic first dimension; and it
    never accepts ``optional`` inputs on a batching model.

    Fails: ``max_batch_size: 8`` with no ``output`` section, for a graph with fixed shapes ``[16]``.

    Passes: ``max_batch_size: 0``.
    """
    yield from _findings("RB606", model, ctx)


@rule("RB607", "onnx-max-batch-size-autofilled", Severity.WARNING)
def check_onnx_max_batch_size_autofilled(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """Auto-complete will set ``max_batch_size`` to 4 behind your back.

    When the config lacks inputs or outputs, ``max_batch_size`` is 0 and every graph tensor has a
    dynamic first dimension, the backend turns batching on with Triton's default maximum of 4 (and adds
    dynamic batching), so the served model differs from the config you wrote.

    Fails: ``max_batch_size: 0`` and no ``output`` for a graph with shapes ``[batch, 16]``.

    Passes: ``max_batch_size: 8`` written explicitly, or inputs and outputs both declared.
    """
    yield from _findings("RB607", model, ctx)


RULES: tuple[Rule, ...] = (
    check_onnx_unreadable,
    check_onnx_input_count,
    check_onnx_tensor_unknown,
    check_onnx_dtype_mismatch,
    check_onnx_dims_mismatch,
    check_onnx_batching_unsupported,
    check_onnx_max_batch_size_autofilled,
)
