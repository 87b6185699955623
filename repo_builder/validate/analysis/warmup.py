"""A warmup sample as the inference request core builds from it (``InferenceRequest::Normalize``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from repo_builder import dtypes
from repo_builder.validate.analysis.enums import enum_name
from repo_builder.validate.analysis.shapes import TYPE_INVALID, WILDCARD, dims_text

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import DataType, ModelInput, ModelWarmup

WARMUP_FOLDER = "warmup"


def warmup_input_count_problem(model_name: str, declared: Sequence[ModelInput], fed: Iterable[str]) -> str | None:
    """Core's input count check (``InferenceRequest::Normalize``) on a warmup request, or None.

    Only warmup inputs that are model inputs count (others become override inputs); the request fails
    when required (non-optional) inputs are missing. Texts as core writes them: names quoted, joined
    by ',' without spaces.
    """
    names = {io.name for io in declared}
    given = [n for n in fed if n in names]
    required = sum(1 for io in declared if not io.optional)
    if len(given) >= required:  # warmup names are map keys: never more than the declared inputs
        return None
    missing = [io.name for io in declared if not io.optional and io.name not in given]
    got = "[" + ",".join(f"'{n}'" for n in given) + "]"
    lacking = "[" + ",".join(f"'{n}'" for n in missing) + "]"
    expected = (
        f"expected {len(declared)} inputs"
        if required == len(declared)
        else f"expected number of inputs between {required} and {len(declared)}"
    )
    return (
        f"{expected} but got {len(given)} inputs for model '{model_name}'. Got input(s) {got}, "
        f"but missing required input(s) {lacking}. Please provide all required input(s)."
    )



def _protocol_name(data_type: DataType.ValueType) -> str:
    """Core's DataTypeToProtocolString (``TYPE_STRING`` -> ``BYTES``)."""
    from tritonclient.grpc import model_config_pb2 as pb  # deferred package: only the protobuf classes

    name = enum_name(pb.DataType, data_type)
    return next((d.wire for d in dtypes.DTYPES if d.triton == name), name.removeprefix("TYPE_"))


def warmup_request_problem(
    model_name: str, max_batch_size: int, input_name: str, spec: ModelWarmup.Input, declared: ModelInput
) -> str | None:
    """Core's per-input checks (``InferenceRequest::Normalize``) on one warmup input fed to model input
    ``declared``, or None: data type first, then dims.

    Triton builds each warmup request with batch 1 (prepended to the warmup dims when the model batches)
    and compares the dims without it to the config's ``dims`` (not ``reshape``); ``-1`` matches any size.
    """
    if TYPE_INVALID not in (spec.data_type, declared.data_type) and spec.data_type != declared.data_type:
        return (
            f"inference input '{input_name}' data-type is '{_protocol_name(spec.data_type)}', "
            f"but model '{model_name}' expects '{_protocol_name(declared.data_type)}'"
        )
    want, got = list(declared.dims), list(spec.dims)
    if not want or WILDCARD in got or (declared.is_shape_tensor and max_batch_size > 0):
        return None  # other checks refuse these first; batched shape tensors keep their batch dim
    if len(want) == len(got) and all(w in (WILDCARD, g) for w, g in zip(want, got, strict=True)):
        return None
    batched = max_batch_size > 0
    expected = dims_text(([WILDCARD] if batched else []) + want)
    shape = dims_text(([1] if batched else []) + got)
    text = f"unexpected shape for input '{input_name}' for model '{model_name}'. Expected {expected}, got {shape}."
    if batched:
        text += (
            " NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
            "prepended to each input shape. If you want to specify the full shape including the batch dim in "
            "your input dims config, try setting max_batch_size to zero. See the model configuration docs for "
            "more info on max_batch_size."
        )
    return text

