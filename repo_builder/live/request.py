"""The request ``--live`` sends to an ensemble, and the check of its answer.

Real inputs when there are any: files given with ``--input [MODEL:]NAME=FILE`` (as ``bench --input``
takes them), else the family's sample when the build recorded the ensemble's task
(``samples.py``); inputs neither covers are synthesized from the config. A request with real inputs
proves the pipeline: its failure, or an answer whose names, data types or shapes differ from the config
(or that fails the family's check), is an error. With only synthesized inputs a failure proves less (the
values may be meaningless to the model) and stays a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder import dtypes
from repo_builder.errors import UserError
from repo_builder.live.samples import Answer, family_sample
from repo_builder.triton.synthesize import request_shape, synthesize_input
from repo_builder.validate.analysis.enums import enum_name

if TYPE_CHECKING:
    import numpy as np

MAX_INPUT_FILE_BYTES = 64 << 20


class RequestKind:
    FAMILY = "family"  # the family's real sample
    FILES = "files"  # --input files
    SYNTHESIZED = "synthesized"

    REAL = (FAMILY, FILES)


@dataclass(frozen=True)
class InputFile:
    """One ``--input [MODEL:]NAME=FILE``: FILE's bytes as one row of input NAME (of MODEL, or of every
    ensemble with an input NAME). A ``.npy`` file is sent as the array it holds."""

    name: str
    path: Path
    model: str | None = None

    def applies_to(self, model: str) -> bool:
        return self.model is None or self.model == model


def parse_input_file(value: str, option: str = "--input") -> InputFile:
    """``IMAGE=photo.jpg`` or ``clf:TEXT=review.txt``; the file must exist."""
    target, sep, path = value.partition("=")
    model, colon, name = target.rpartition(":")
    if not sep or not name or not path or (colon and not model):
        raise UserError(f"{option} {value!r}: expected [MODEL:]NAME=FILE, e.g. IMAGE=photo.jpg or clf:TEXT=review.txt")
    file = Path(path)
    if not file.is_file():
        raise UserError(f"{option} {value!r}: {file} is not a file")
    return InputFile(name, file, model or None)


@dataclass(frozen=True)
class LiveRequest:
    inputs: Mapping[str, np.ndarray[Any, Any]]
    datatypes: Mapping[str, str]
    kind: str  # a RequestKind value
    description: str  # "a real request (a JPEG photo, image-classification)", "a synthesized request"
    batch: int
    check: Callable[[Answer], str | None] | None = None  # the family's check of the answer

    @property
    def real(self) -> bool:
        return self.kind in RequestKind.REAL


def _read(file: InputFile) -> bytes:
    try:
        if file.path.stat().st_size > MAX_INPUT_FILE_BYTES:
            raise UserError(f"--input {file.path}: larger than {MAX_INPUT_FILE_BYTES >> 20} MB")
        return file.path.read_bytes()
    except OSError as exc:
        raise UserError(f"--input {file.path}: cannot read it ({exc.strerror or exc})") from None


def _from_files(tensor: Any, config: Any, files: Sequence[InputFile], batch: int) -> tuple[np.ndarray[Any, Any], str]:
    import numpy as np  # --live needs the serve extra, which brings numpy

    dtype = dtypes.from_triton(_type_name(tensor.data_type))
    if dtype.triton == "TYPE_STRING":
        rows = [_read(f) for f in files]
        shape = request_shape(list(tensor.dims), config.max_batch_size, batch)
        try:
            return np.array(rows, dtype=object).reshape(shape), dtype.wire
        except ValueError:
            raise UserError(f"--input {tensor.name}: {len(rows)} file(s) do not fill its shape {shape}") from None
    if len(files) == 1 and files[0].path.suffix == ".npy":
        try:
            return np.load(files[0].path, allow_pickle=False), dtype.wire
        except ValueError as exc:
            raise UserError(f"--input {files[0].path}: not a numpy .npy array ({exc})") from None
    if dtype.triton == "TYPE_UINT8":
        arrays = [np.frombuffer(_read(f), dtype=np.uint8) for f in files]
        if len({len(a) for a in arrays}) != 1:
            raise UserError(f"--input {tensor.name}: files of different sizes cannot share one request")
        array = np.stack(arrays) if config.max_batch_size > 0 else arrays[0]
        return array, dtype.wire
    raise UserError(f"--input {tensor.name}: a {dtype.triton} input takes one .npy file holding the array")


def _string_input(config: Any) -> Any | None:
    return next((t for t in config.input if _type_name(t.data_type) == "TYPE_STRING"), None)


def plan_request(model: str, config: Any, task: str | None, files: Sequence[InputFile] = ()) -> LiveRequest:
    """The request for ensemble ``model`` (its ``ModelConfig``): files, else the family's sample, else synthesized."""
    mine = [f for f in files if f.applies_to(model) and any(t.name == f.name for t in config.input)]
    sample = family_sample(task)
    string_input = _string_input(config)
    if mine:
        by_name = {t.name: [f for f in mine if f.name == t.name] for t in config.input}
        batch = max(len(v) for v in by_name.values()) if config.max_batch_size > 0 else 1
        kind, description, check = RequestKind.FILES, "a real request (the --input files)", None
        real: dict[str, tuple[np.ndarray[Any, Any], str]] = {
            t.name: _from_files(t, config, by_name[t.name], batch) for t in config.input if by_name[t.name]
        }
    elif sample is not None and string_input is not None:
        rows = sample.rows()
        batch = len(rows) if config.max_batch_size > 0 else 1
        kind, description, check = RequestKind.FAMILY, f"a real request ({sample.description}, {task})", sample.check
        real = {string_input.name: _rows(string_input, config, rows[:batch])}
    else:
        return _synthesized(config)
    arrays, wires = {}, {}
    for i, tensor in enumerate(config.input):
        if tensor.name in real:
            arrays[tensor.name], wires[tensor.name] = real[tensor.name]
        elif tensor.optional:  # left out, as a client may (NVCF's IMAGE_ASSET, a detector's CONF ...)
            continue
        else:
            made = synthesize_input(tensor, config.max_batch_size, batch, seed=i)
            arrays[tensor.name], wires[tensor.name] = made.array, made.wire
    return LiveRequest(arrays, wires, kind, description, batch, check)


def _rows(tensor: Any, config: Any, rows: Sequence[bytes]) -> tuple[np.ndarray[Any, Any], str]:
    import numpy as np  # --live needs the serve extra, which brings numpy

    shape = request_shape(list(tensor.dims), config.max_batch_size, len(rows))
    return np.array(list(rows), dtype=object).reshape(shape), "BYTES"


def _synthesized(config: Any) -> LiveRequest:
    # Optional inputs are left out; when every input is optional, the first stands in (Triton refuses a
    # request with no input at all when the model batches).
    chosen = [(i, t) for i, t in enumerate(config.input) if not t.optional] or list(enumerate(config.input))[:1]
    made = [synthesize_input(t, config.max_batch_size, 1, seed=i) for i, t in chosen]
    return LiveRequest({m.name: m.array for m in made}, {m.name: m.wire for m in made}, RequestKind.SYNTHESIZED,
                       "a synthesized request", 1)


def _shape_matches(shape: Sequence[int], expected: Sequence[int]) -> bool:
    return len(shape) == len(expected) and all(e < 0 or s == e for s, e in zip(shape, expected, strict=True))


def check_answer(config: Any, answer: Answer, batch: int) -> str | None:
    """The first way the answer differs from the ensemble's declared outputs (names, data types, shapes)."""
    for tensor in config.output:
        if tensor.name not in answer:
            return f"the answer has no output '{tensor.name}' (it has {', '.join(sorted(answer)) or 'none'})"
        array = answer[tensor.name]
        dtype = dtypes.from_triton(_type_name(tensor.data_type))
        string = dtype.triton == "TYPE_STRING"
        if (array.dtype.kind in "OSU") != string or (not string and array.dtype.name != _numpy_name(dtype)):
            return f"output '{tensor.name}' is {array.dtype.name}, the config declares {dtype.triton}"
        dims = [int(d) for d in tensor.dims]
        expected = [batch, *dims] if config.max_batch_size > 0 else dims
        if not _shape_matches(array.shape, expected):
            shown = ["-1" if d < 0 else str(d) for d in expected]
            return f"output '{tensor.name}' has shape {list(array.shape)}, the config declares [{', '.join(shown)}]"
    return None


def _numpy_name(dtype: dtypes.DType) -> str:
    return "float32" if dtype.triton == "TYPE_BF16" else dtype.numpy  # tritonclient reads BF16 as float32


def _type_name(value: int) -> str:
    from tritonclient.grpc import model_config_pb2  # light, but only --live needs it here

    return enum_name(model_config_pb2.DataType, value)  # never raises on a number the proto does not name
