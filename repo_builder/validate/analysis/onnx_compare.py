"""What the ONNX Runtime backend compares between a config and the ONNX graph (``onnxruntime.cc``).

Triton stops at the first problem; these functions report them all, each tagged with its rule code.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, NamedTuple

from repo_builder.dtypes import _BY_ONNX_ID
from repo_builder.onnx_io import OnnxSignature, OnnxTensor
from repo_builder.validate.analysis.bounded import name_list
from repo_builder.validate.analysis.enums import enum_name
from repo_builder.validate.records import Severity

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInput, ModelOutput

# Triton's default --backend-config=default-max-batch-size, used when auto-complete finds batching.
DEFAULT_MAX_BATCH_SIZE = 4
_SEQUENCE_CONTROLS = (
    "CONTROL_SEQUENCE_START",
    "CONTROL_SEQUENCE_END",
    "CONTROL_SEQUENCE_READY",
    "CONTROL_SEQUENCE_CORRID",
)



def _shape(dims: tuple[int, ...] | list[int]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def triton_type(elem_type: int | None) -> str:
    dtype = _BY_ONNX_ID.get(elem_type) if elem_type is not None else None
    return dtype.triton if dtype is not None else "TYPE_INVALID"


_DATA_TYPE: list[Any] = []  # the DataType enum's descriptor, looked up at the first comparison


def _config_type(io: ModelInput | ModelOutput) -> str:
    if not _DATA_TYPE:
        _DATA_TYPE.append(io.DESCRIPTOR.fields_by_name["data_type"].enum_type)
    return enum_name(_DATA_TYPE[0], io.data_type)


# The DataType number of each ONNX element type's Triton name (None: the name is no DataType value, so no
# config type equals it), filled at first sight: the comparison is then two ints, the names built for a finding.
_TYPE_NUMBER: dict[int, int | None] = {}


def _same_type(io: ModelInput | ModelOutput, elem_type: int) -> bool:
    """Whether the config's ``data_type`` is the graph's element type (``_config_type`` equal to ``triton_type``)."""
    number = _TYPE_NUMBER.get(elem_type, -1)
    if number == -1:
        if not _DATA_TYPE:
            _DATA_TYPE.append(io.DESCRIPTOR.fields_by_name["data_type"].enum_type)
        value = _DATA_TYPE[0].values_by_name.get(triton_type(elem_type))
        number = _TYPE_NUMBER[elem_type] = value.number if value is not None else None
    return number is not None and io.data_type == number


class OnnxProblem(NamedTuple):
    code: str
    message: str
    hint: str | None = None
    severity: Severity | None = None


def _compare_dims(
    model: str, tensor: str, shape: tuple[int, ...], dims: list[int], mbs: int, exact: bool
) -> OnnxProblem | None:
    """The backend's CompareDimsSupported: the config's dims (plus the batch dim) against the graph's."""
    if mbs > 0:
        if not shape or shape[0] != -1:
            return OnnxProblem(
                "RB605",
                f"model '{model}', tensor '{tensor}': for the model to support batching the shape should have at "
                f"least 1 dimension and the first dimension must be -1; but shape expected by the model is "
                f"{_shape(shape)}",
                "set max_batch_size: 0 (the graph has no batch dimension) or export the model with a dynamic first axis",
            )
        if not _fits(shape, dims, exact, 1):  # the batch dim (-1) is shape[0]: the rest against dims
            full = [-1, *dims]
            return OnnxProblem(
                "RB605",
                f"model '{model}', tensor '{tensor}': the model expects {len(shape)} dimensions (shape "
                f"{_shape(shape)}) but the model configuration specifies {len(full)} dimensions (an initial "
                f"batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making "
                f"complete shape {_shape(full)})",
                f"with max_batch_size > 0, dims leave out the batch dimension: dims: {_shape(list(shape[1:]))}",
            )
        return None
    if not _fits(shape, dims, exact, 0):
        return OnnxProblem(
            "RB605",
            f"model '{model}', tensor '{tensor}': the model expects {len(shape)} dimensions (shape "
            f"{_shape(shape)}) but the model configuration specifies {len(dims)} dimensions (shape {_shape(dims)})",
            f"with max_batch_size: 0, dims are the full shape: dims: {_shape(list(shape))}",
        )
    return None


def _fits(shape: tuple[int, ...], dims: list[int], exact: bool, skip: int) -> bool:
    """Whether ``shape[skip:]`` has ``dims``' rank and each dim equals the config's (where the graph's is
    fixed, or everywhere when ``exact``)."""
    if len(shape) != len(dims) + skip:
        return False
    rest = list(shape[skip:] if skip else shape)
    if rest == dims or exact:  # the usual case, and the whole test when exact
        return rest == dims
    return all(m == c or m == -1 for m, c in zip(rest, dims, strict=True))


def _well_formed_dims(io: ModelInput | ModelOutput) -> list[int] | None:
    """The shape the backend compares (the reshape's, else the dims) of a well-formed entry, else None.

    Malformed entries (no name, type or dims; dims of 0 or below -1) are the config rules' business."""
    # Slices: a repeated field's [:] is a list at half the cost of list() (upb's iterator is slow).
    if io.HasField("reshape"):
        dims = io.reshape.shape[:]
    else:
        dims = io.dims[:]
        if not dims:
            return None
    if not io.name or io.data_type == 0:
        return None
    for d in dims:
        if d < 1 and d != -1:
            return None
    return dims


def _sequence_inputs(config: ModelConfig) -> int:
    if not config.HasField("sequence_batching"):
        return 0
    seq = config.sequence_batching
    names = {enum_name(seq.Control.Kind, c.kind) for ci in seq.control_input for c in ci.control}
    return sum(1 for kind in _SEQUENCE_CONTROLS if kind in names) + len(seq.state)


def autocomplete_batching(name: str, mbs: int, sig: OnnxSignature) -> tuple[int, OnnxProblem | None]:
    """The backend's auto-complete decides batching from the graph: (max_batch_size, problem)."""
    tensors = [*sig.inputs, *sig.outputs]
    batching = all(t.dims is not None and len(t.dims) > 0 and t.dims[0] == -1 for t in tensors)
    if batching and mbs == 0:
        return DEFAULT_MAX_BATCH_SIZE, OnnxProblem(
            "RB607",
            f"autofilled max_batch_size to {DEFAULT_MAX_BATCH_SIZE} for model '{name}' since batching is supporrted "
            "but no max_batch_size is specified in model configuration. Must specify max_batch_size to utilize "
            "autofill with a larger max batch size",
            "set max_batch_size explicitly (0 to turn batching off)",
        )
    if not batching and mbs != 0:
        return mbs, OnnxProblem(
            "RB606",
            f"autofill failed for model '{name}': model does not support batching while non-zero "
            "max_batch_size is specified",
            "the graph's first dimension is not dynamic on every input and output: set max_batch_size: 0",
        )
    return mbs, None


def compare_onnx(name: str, config: ModelConfig, sig: OnnxSignature, strict: bool) -> list[OnnxProblem]:
    """Every problem the ONNX Runtime backend would find between ``config`` and the graph ``sig``.

    Triton stops at the first; we report them all.
    """
    problems: list[OnnxProblem] = []
    mbs = config.max_batch_size
    inputs, outputs = config.input[:], config.output[:]
    batch_inputs = len(config.batch_input)
    have_inputs = len(inputs) + batch_inputs > 0
    if not strict and not (have_inputs and outputs):
        # Auto-complete fills missing inputs/outputs from the graph (consistent by construction).
        mbs, problem = autocomplete_batching(name, mbs, sig)
        if problem is not None:
            problems.append(problem)
            if problem.code == "RB606":
                return problems
    # Input count (ORT counts non-initializer graph inputs; optional config inputs may be initializers).
    # Without auto-complete an empty input list is compared too ("configuration expects 0 inputs").
    if have_inputs or strict:
        expected = batch_inputs + (_sequence_inputs(config) if config.HasField("sequence_batching") else 0)
        for io in inputs:
            if not io.optional:
                expected += 1
        if expected != len(sig.inputs):
            problems.append(
                OnnxProblem(
                    "RB602",
                    f"unable to load model '{name}', configuration expects {expected} inputs, model provides "
                    f"{len(sig.inputs)}",
                    "the graph's inputs are: " + name_list(t.name for t in sig.inputs),
                )
            )
    if inputs:
        _compare_inputs(problems, name, inputs, sig, mbs)
    if outputs:
        _compare_outputs(problems, name, config, outputs, sig, mbs)
    return problems


def _allowed(by_name: dict[str, OnnxTensor]) -> str:
    # Built only for a finding: most models have none, and sorting every graph's names adds up.
    return name_list(sorted(by_name, key=os.fsencode))


def _named(name: str, tensors: tuple[OnnxTensor, ...]) -> OnnxTensor | None:
    """The last tensor called ``name`` (as a name-to-tensor dict of them would keep it).

    A graph has a few tensors: a scan costs less than building that dict for every model."""
    for t in reversed(tensors):
        if t.name == name:
            return t
    return None


def _compare_inputs(problems: list[OnnxProblem], name: str, inputs: list[ModelInput], sig: OnnxSignature, mbs: int) -> None:
    for io in inputs:
        dims = _well_formed_dims(io)
        if dims is None:
            continue
        io_name = io.name
        if io.optional and mbs != 0:
            problems.append(
                OnnxProblem(
                    "RB606",
                    f"unable to load model '{name}', optional input '{io_name}' is not supported for models that "
                    "support batching",
                    "set max_batch_size: 0 or make the input required",
                )
            )
            continue
        # {inputs, then overridable}'s last tensor of the name: an overridable one wins
        tensor = _named(io_name, sig.overridable) if sig.overridable else None
        if tensor is None:
            tensor = _named(io_name, sig.inputs)
        if tensor is None:
            by_name = {t.name: t for t in (*sig.inputs, *sig.overridable)}
            problems.append(
                OnnxProblem(
                    "RB603",
                    f"unexpected inference input '{io_name}', allowed inputs are: {_allowed(by_name)}",
                    "use the graph's input names",
                )
            )
            continue
        found = _compare_tensor(name, "input", io, io_name, dims, tensor, mbs, io.allow_ragged_batch)
        if found:
            problems.extend(found)


_NO_NAMES: frozenset[str] = frozenset()


def _compare_outputs(
    problems: list[OnnxProblem], name: str, config: ModelConfig, outputs: list[ModelOutput], sig: OnnxSignature, mbs: int
) -> None:
    batch_targets: set[str] | frozenset[str] = {t for bo in config.batch_output for t in bo.target_name} if config.batch_output else _NO_NAMES
    for io in outputs:
        dims = _well_formed_dims(io)
        if dims is None:
            continue
        io_name = io.name
        tensor = _named(io_name, sig.outputs)
        if tensor is None:
            out_by_name = {t.name: t for t in sig.outputs}
            problems.append(
                OnnxProblem(
                    "RB603",
                    f"unexpected inference output '{io_name}', allowed outputs are: {_allowed(out_by_name)}",
                    "use the graph's output names",
                )
            )
            continue
        found = _compare_tensor(name, "output", io, io_name, dims, tensor, mbs, False)
        # A batch output's shape is the backend's to fill: only its data type is compared.
        if found:
            problems.extend(p for p in found if io_name not in batch_targets or p.code != "RB605")


_NONE: list[OnnxProblem] = []  # what a clean tensor returns (never appended to)


def _compare_tensor(
    name: str, kind: str, io: ModelInput | ModelOutput, io_name: str, dims: list[int], tensor: OnnxTensor, mbs: int,
    ragged: bool,
) -> list[OnnxProblem]:
    """The data type and shape of config entry ``io`` (named ``io_name``; ``ragged``: an input's
    allow_ragged_batch) against the graph's ``tensor``; inputs compare dims where the graph's are fixed,
    outputs all of them."""
    out: list[OnnxProblem] = _NONE
    elem_type = tensor.elem_type
    if elem_type is not None:
        number = _TYPE_NUMBER.get(elem_type, -1)  # _same_type's lookup, inline: asked for every tensor
        if number == -1 or number is None or io.data_type != number:
            out = _type_problems(name, kind, io, io_name, elem_type)
    shape = tensor.dims
    if shape is None:
        return out  # rank unknown in the graph: nothing to compare
    if ragged:
        if shape != (-1,):
            out = [
                *out,
                OnnxProblem(
                    "RB605",
                    f"unable to load model '{name}', configuration expects model provides input with shape [-1]  "
                    f"for ragged input '{io_name}', model provides {_shape(shape)}",
                    "a ragged input must be 1-D and dynamic in the graph",
                ),
            ]
        return out
    if len(shape) == 0:
        if any(d != 1 for d in dims):
            out = [
                *out,
                OnnxProblem(
                    "RB605",
                    f"unable to load model '{name}', scalar tensor '{io_name}', should only provide 1 in the model "
                    f"configuration when the model doesn't support batching. Model configuration provided: "
                    f"{_shape(dims)}.",
                    "a scalar in the graph is dims: [1] in the config",
                ),
            ]
        return out
    # The usual case first: the graph's shape is exactly the config's (after the batch dim), which fits
    # whether or not dynamic graph dims are wildcards.
    if list(shape[1:]) == dims and shape[0] == -1 if mbs > 0 else list(shape) == dims:
        return out
    problem = _compare_dims(name, io_name, shape, dims, mbs, kind == "output")
    if problem is not None:
        out = [*out, problem]
    return out


def _type_problems(name: str, kind: str, io: ModelInput | ModelOutput, io_name: str, elem_type: int) -> list[OnnxProblem]:
    if _same_type(io, elem_type):
        return _NONE
    expected = _config_type(io)
    actual = triton_type(elem_type)
    return [
        OnnxProblem(
            "RB604",
            f"unable to load model '{name}', configuration expects datatype {expected} for {kind} "
            f"'{io_name}', model provides {actual}",
            f"set data_type: {actual}",
        )
    ]
