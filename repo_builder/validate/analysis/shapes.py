"""Tensor shapes as core checks them (``ValidateIOShape``, ``GetElementCount``) and a config's tensors."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from repo_builder.validate.analysis.memo import model_fact
from repo_builder.validate.records import ModelEntry

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelInput, ModelOutput

WILDCARD = -1
TYPE_INVALID = 0
TYPE_STRING = 13
FORMAT_NHWC, FORMAT_NCHW = 1, 2


def element_count(dims: Sequence[int]) -> int:
    """Element count, or -1 when any dimension is variable (core's GetElementCount)."""
    if any(d == WILDCARD for d in dims):
        return WILDCARD
    return math.prod(dims)


def _chunks(dims: Sequence[int]) -> list[int]:
    """Element counts of the runs between variable-size dimensions."""
    out, current = [], 1
    for d in dims:
        if d == WILDCARD:
            out.append(current)
            current = 1
        else:
            current *= d
    out.append(current)
    return out


def io_shape_problems(io: ModelInput | ModelOutput, max_batch_size: int, kind: str) -> Iterator[str]:
    """Core's ValidateIOShape for one input or output, minus the data_type/dims presence checks."""
    has_reshape = io.HasField("reshape")
    if not has_reshape and min(io.dims, default=1) >= 1:  # the common case, decided cheaply
        return
    prefix = f"{kind} '{io.name}' "
    reshape = list(io.reshape.shape)
    if has_reshape and not reshape and max_batch_size == 0:
        yield prefix + "cannot have empty reshape for non-batching model as scalar tensors are not supported"
        return
    if any(d < 1 and d != WILDCARD for d in io.dims):
        yield prefix + "dimension must be integer >= 1, or -1 to indicate a variable-size dimension"
        return
    if not has_reshape:
        return
    if any(d < 1 and d != WILDCARD for d in reshape):
        yield prefix + "reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension"
        return
    # Core treats an empty reshape as a scalar: allowed only where dims hold exactly one element.
    dims_size, reshape_size = element_count(io.dims), (element_count(reshape) if reshape else 0)
    if dims_size != reshape_size and (reshape_size != 0 or dims_size != 1):
        yield prefix + "has different size for dims and reshape"
        return
    if dims_size == WILDCARD:
        a, b = _chunks(io.dims), _chunks(reshape)
        if len(a) != len(b):
            yield prefix + "has different number of variable-size dimensions for dims and reshape"
        elif a != b:
            yield prefix + "has different size for dims and reshape"



def config_ios(model: ModelEntry) -> tuple[tuple[str, ModelInput | ModelOutput], ...]:
    """("model input" | "model output", tensor) pairs, kept on the entry: walking a proto's repeated
    fields is slow, and several rules walk them for every model."""
    return model_fact(model, config_ios, _ios)


def _ios(model: ModelEntry) -> tuple[tuple[str, ModelInput | ModelOutput], ...]:
    cfg = model.config
    if cfg is None:  # no config, no tensors (the rules asking return before this)
        return ()
    return (*[("model input", io) for io in cfg.input[:]], *[("model output", io) for io in cfg.output[:]])


def dims_text(dims: Iterable[int]) -> str:
    """Core's DimsListToString: ``[-1,4]``."""
    return "[" + ",".join(str(d) for d in dims) + "]"


class IoSummary(NamedTuple):
    """What one pass over a config's tensors says about all of them: each flag, when true, means a rule has
    nothing to find, so the common clean config is judged without each rule walking the tensors again
    (protobuf's accessors cost 0.1 to 0.3 microseconds each)."""

    complete: bool  # every tensor has a name, a data_type the proto names (not TYPE_INVALID) and dims (RB202)
    plain_shapes: bool  # no reshape and every dimension >= 1: ``io_shape_problems`` finds nothing (RB203)
    plain_features: bool  # no NHWC/NCHW format, shape tensor, non-linear format or TYPE_STRING (RB204)
    unique_names: bool  # no input name twice, no output name twice (RB205)
    no_labels: bool  # no output names a label_filename (RB207)


def io_summary(model: ModelEntry) -> IoSummary:
    """``IoSummary`` of the model's config (all true without one), kept on the entry."""
    return model_fact(model, io_summary, _summarize)


_NAMED_TYPES: frozenset[int] = frozenset()


def _named_types(io: ModelInput | ModelOutput) -> frozenset[int]:
    """The data_type numbers model_config.proto names (read from the proto once per process)."""
    global _NAMED_TYPES
    if not _NAMED_TYPES:
        enum = type(io).DESCRIPTOR.fields_by_name["data_type"].enum_type
        _NAMED_TYPES = frozenset(enum.values_by_number if enum is not None else ())
    return _NAMED_TYPES


# The tensor fields the flags below look for besides name, data_type and dims. The text format names every
# field it sets (Triton parses configs without field numbers, and ModelConfig has no extensions or Any), so a
# config text that never writes one of these words sets none of them, and they need not be read: a config
# that does (or a comment or name using the word) is read field by field.
_RARE_TENSOR_FIELDS = ("reshape", "is_shape_tensor", "is_non_linear_format_io", "format", "label_filename")


def written_anywhere(text: str | None, words: tuple[str, ...]) -> bool:
    """Whether config ``text`` might set a field named in ``words`` (True without a text: read them all)."""
    return text is None or any(word in text for word in words)


def _summarize(model: ModelEntry) -> IoSummary:
    cfg = model.config
    complete = plain_shapes = plain_features = unique_names = no_labels = True
    if cfg is None:
        return IoSummary(complete, plain_shapes, plain_features, unique_names, no_labels)
    rare = written_anywhere(model.config_text, _RARE_TENSOR_FIELDS)
    named = _NAMED_TYPES
    # Slices: a list of a repeated field costs less than iterating the field itself.
    for inputs, tensors in ((True, cfg.input[:]), (False, cfg.output[:])):
        seen: set[str] = set()
        for io in tensors:
            name, data_type, dims = io.name, io.data_type, io.dims[:]
            if not name or data_type == TYPE_INVALID or not dims or data_type not in (named or _named_types(io)):
                complete = False
            if dims and min(dims) < 1:
                plain_shapes = False
            if data_type == TYPE_STRING:
                plain_features = False
            if name and name in seen:
                unique_names = False
            seen.add(name)
            if not rare:
                continue
            if io.HasField("reshape"):
                plain_shapes = False
            if (
                io.is_shape_tensor
                or io.is_non_linear_format_io
                or (inputs and io.format in (FORMAT_NHWC, FORMAT_NCHW))  # type: ignore[union-attr]
            ):
                plain_features = False
            if not inputs and io.label_filename:  # type: ignore[union-attr]
                no_labels = False
    return IoSummary(complete, plain_shapes, plain_features, unique_names, no_labels)
