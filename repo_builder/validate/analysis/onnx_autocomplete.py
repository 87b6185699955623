"""The config an ONNX Runtime model gets from auto-complete, built from its graph as the backend builds it.

An ensemble is checked against its members' *completed* configs (core asks the loaded model for its
config), so a member whose inputs or outputs come from its ONNX file must be completed first, or the
ensemble's tensor checks cannot see a producer's `[-1,-1,97]` meeting a consumer's `[-1,-1]`. The ONNX
Runtime backend fills the inputs when the config declares none (outputs likewise), decides batching from
the graph when it fills anything (``autocomplete_batching``), and drops the batch dimension from the
graph's shapes when it batches.
"""

from __future__ import annotations

from typing import Any

from repo_builder.onnx_io import OnnxSignature, OnnxTensor
from repo_builder.validate.analysis.memo import model_fact
from repo_builder.validate.analysis.onnx_compare import OnnxProblem, autocomplete_batching, triton_type
from repo_builder.validate.analysis.onnx_model import onnx_filename, version_graph
from repo_builder.validate.analysis.versions import versions_to_load
from repo_builder.validate.records import ModelEntry, RuleContext


def onnx_completed_config(model: ModelEntry, ctx: RuleContext) -> Any | None:
    """``model``'s config with the inputs/outputs and batching ONNX Runtime's auto-complete fills in from
    the graph of its newest loaded version; None when that cannot be known offline (not ONNX Runtime,
    ``--strict``, no readable graph, a tensor of unknown rank or type)."""
    if ctx.options.strict:
        return None
    return model_fact(model, (onnx_completed_config,), lambda m: _complete(m, ctx))


def _complete(model: ModelEntry, ctx: RuleContext) -> Any | None:
    filename = onnx_filename(model, ctx)
    numbers = versions_to_load(model)
    if filename is None or not numbers:
        return None
    found = version_graph(model, max(numbers), filename)  # read once with the RB6xx checks
    sig = found.graph if found is not None else None
    if sig is None or isinstance(sig, OnnxProblem) or not _typed(sig):
        return None  # no file, not downloaded (an INFO problem), unreadable, or untyped
    from tritonclient.grpc import model_config_pb2 as pb  # protobuf classes: loaded with the configs already

    cfg = pb.ModelConfig()
    if model.config is not None:
        cfg.CopyFrom(model.config)
    have_inputs = len(cfg.input) + len(cfg.batch_input) > 0
    if have_inputs and cfg.output:
        return cfg  # nothing to fill: the declared tensors are the ones Triton checks
    cfg.max_batch_size, _ = autocomplete_batching(model.name, cfg.max_batch_size, sig)
    skip = 1 if cfg.max_batch_size > 0 else 0
    if not have_inputs:
        for tensor in sig.inputs:
            _add(cfg.input.add(), tensor, skip, pb)
    if not cfg.output:
        for tensor in sig.outputs:
            _add(cfg.output.add(), tensor, skip, pb)
    return cfg


def _typed(sig: OnnxSignature) -> bool:
    tensors = (*sig.inputs, *sig.outputs)
    return all(t.dims is not None and triton_type(t.elem_type) != "TYPE_INVALID" for t in tensors)


def _add(io: Any, tensor: OnnxTensor, skip: int, pb: Any) -> None:
    io.name = tensor.name
    io.data_type = pb.DataType.Value(triton_type(tensor.elem_type))
    io.dims.extend(tensor.dims[skip:] if tensor.dims is not None else ())
