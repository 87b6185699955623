"""Tensor shapes as core checks them (``ValidateIOShape``, ``GetElementCount``) and a config's tensors."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

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
    return (*(("model input", io) for io in cfg.input), *(("model output", io) for io in cfg.output))


def dims_text(dims: Iterable[int]) -> str:
    """Core's DimsListToString: ``[-1,4]``."""
    return "[" + ",".join(str(d) for d in dims) + "]"
