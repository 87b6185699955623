"""The tensors an ensemble passes between its members: stage three of core's checks.

Core: ``ValidateEnsembleConfig`` and ``ValidateTensorMapping`` (``ensemble_utils.cc``), judged only when
the ensemble's own config and its members pass (ensemble_graph.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from repo_builder.validate.analysis.autocomplete import backend_fills_io, io_autocompleted
from repo_builder.validate.analysis.bounded import name_list
from repo_builder.validate.analysis.ensemble_graph import lookup, member_names, members_ok, memo, steps
from repo_builder.validate.analysis.enums import enum_name
from repo_builder.validate.analysis.onnx_autocomplete import onnx_completed_config
from repo_builder.validate.analysis.resolve import config_name
from repo_builder.validate.analysis.shapes import TYPE_INVALID, WILDCARD
from repo_builder.validate.records import Finding, ModelEntry, RuleContext, Severity

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import (
        ModelConfig,
        ModelEnsembling,
        ModelInput,
        ModelOutput,
    )


@dataclass(eq=False)
class _TensorNode:
    """Core's TensorNode: the type and shape of one ensemble tensor and the model it came from."""

    model: str
    dtype: int = TYPE_INVALID
    dims: tuple[int, ...] = ()
    full_dims: tuple[int, ...] = ()
    decoupled: bool = False
    label: int = 0
    visited: bool = False
    prev: list[_TensorNode] = field(default_factory=list)
    next: list[_TensorNode] = field(default_factory=list)
    sibling: _TensorNode | None = None


def _node(model: str, batching: bool, dtype: int, dims: Iterable[int]) -> _TensorNode:
    dims = tuple(dims)
    return _TensorNode(model, dtype, dims, ((-1,) if batching else ()) + dims)


def _dims_match(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or WILDCARD in (x, y) for x, y in zip(a, b, strict=True))


def _dims_text(dims: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _consistency(existing: _TensorNode, new: _TensorNode, prefix: str) -> str | None:
    from tritonclient.grpc import model_config_pb2 as pb

    if existing.dtype != new.dtype:
        return (
            f"{prefix}inconsistent data type: {enum_name(pb.DataType, existing.dtype)} is inferred from model "
            f"{existing.model} while {enum_name(pb.DataType, new.dtype)} is inferred from model {new.model}"
        )
    if not _dims_match(existing.dims, new.dims) and not _dims_match(existing.full_dims, new.full_dims):
        return (
            f"{prefix}inconsistent shape: {_dims_text(existing.full_dims)} is inferred from model {existing.model} "
            f"while {_dims_text(new.full_dims)} is inferred from model {new.model}"
        )
    return None


def member_io_final(member: ModelEntry, ctx: RuleContext) -> bool:
    """True when the member's config already holds the inputs/outputs Triton will use.

    Without a config.pbtxt, auto-complete builds one: its inputs/outputs come from the model file when
    the backend reads them (ONNX, TensorRT, a Python ``auto_complete_config``), else there are none (a
    Python model.py without ``auto_complete_config``), and the mapping checks can be decided.
    """
    cfg = member.config
    if cfg is None:
        if ctx.options.strict or member.has_config_file:
            return True  # refused before the tensors matter (RB105, RB201)
        return not backend_fills_io(member)
    if not io_autocompleted(member, ctx):
        return True
    tensors: list[ModelInput | ModelOutput] = [*cfg.input, *cfg.output]
    return (
        bool(cfg.input) and bool(cfg.output) and all(t.data_type != TYPE_INVALID and t.dims for t in tensors)
    )


@dataclass(frozen=True)
class GraphFinding:
    stage: str  # "batch" | "mapping" | "consistency" | "decoupled"
    finding: Finding


def analyze_tensors(model: ModelEntry, ctx: RuleContext) -> list[GraphFinding]:
    """Core's ValidateEnsembleConfig over the scanned configs (only when stages one and two pass)."""
    return memo("tensors", model, ctx, lambda: _analyze_tensors(model, ctx))


def _analyze_tensors(model: ModelEntry, ctx: RuleContext) -> list[GraphFinding]:
    if not members_ok(model, ctx):
        return []
    cfg = model.config
    assert cfg is not None  # an ensemble: its platform comes from its config
    name = config_name(model)
    batching = cfg.max_batch_size > 0
    out: list[GraphFinding] = []
    # A member whose tensors come from its model file: completed from its ONNX graph when that can be read
    # (core judges the ensemble against each member's completed config), else unknown.
    completed = {
        n: onnx_completed_config(cast(ModelEntry, lookup(ctx, n)), ctx)
        for n in member_names(model)
        if not member_io_final(cast(ModelEntry, lookup(ctx, n)), ctx)
    }
    unknown = [n for n, c in completed.items() if c is None]
    if unknown:
        out.append(
            GraphFinding(
                "mapping",
                Finding(
                    f"ensemble '{name}': the inputs and outputs of {name_list(unknown)} come from the model file "
                    "(auto-complete), so the tensor checks need the model file",
                    severity=Severity.INFO,
                    hint="declare the member's inputs and outputs in its config.pbtxt to have them checked offline",
                ),
            )
        )
    tensors: dict[str, _TensorNode] = {}
    io: ModelInput | ModelOutput  # the two loops below
    for io in cfg.input:
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        tensors[io.name] = _node(name, batching, io.data_type, dims)
    sink = _TensorNode(name)
    for io in cfg.output:
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        node = tensors.setdefault(io.name, _node(name, batching, io.data_type, dims))
        sink.prev.append(node)
        node.next.append(sink)

    for step in steps(model):
        member = lookup(ctx, step.model_name)
        assert member is not None  # members_ok: every member exists
        mname = step.model_name
        mcfg = completed.get(mname) or member.config
        if mcfg is None:
            if mname in unknown:
                return out
            from tritonclient.grpc import model_config_pb2 as pb

            mcfg = pb.ModelConfig()  # auto-complete adds no tensors and no batching: config as empty as written
        if mcfg.max_batch_size != 0 and mcfg.max_batch_size < cfg.max_batch_size:
            out.append(
                GraphFinding(
                    "batch",
                    Finding(
                        f"ensemble {name} allows maximum batch size {cfg.max_batch_size}, but it contains model "
                        f"{mname} which only allows maximum batch size to be {mcfg.max_batch_size}",
                        hint=f"lower the ensemble's max_batch_size to {mcfg.max_batch_size} or raise the member's",
                    ),
                )
            )
        if mname in unknown:
            return out  # later steps would be judged against an incomplete graph
        problems = _map_step(name, step, mcfg, tensors)
        hint = (
            f"'{mname}' has no config.pbtxt and auto-complete fills in no inputs or outputs for it (a model.py "
            "without auto_complete_config): write its config.pbtxt"
            if member.config is None and completed.get(mname) is None
            else None
        )
        out.extend(GraphFinding(stage, Finding(text, hint=hint)) for stage, text in problems)
        if problems:
            return out
    problem = _decoupled_problem(name, cfg, tensors)
    if problem:
        out.append(GraphFinding("decoupled", Finding(problem)))
    return out


Problems = list[tuple[str, str]]  # (stage, Triton's text)


def _merge(tensors: dict[str, _TensorNode], tensor: str, new: _TensorNode, ensemble: str) -> str | None:
    """Add a member's view of ``tensor`` to the graph, or say how it contradicts the one already there."""
    if tensor not in tensors:
        tensors[tensor] = new
        return None
    return _consistency(tensors[tensor], new, f"in ensemble {ensemble}, ensemble tensor {tensor}: ")


def _map_inputs(ensemble: str, mname: str, input_map: dict[str, str], member_inputs: list[ModelInput], batching: bool,
                tensors: dict[str, _TensorNode]) -> Problems:
    inputs = {io.name for io in member_inputs}
    problems: Problems = [
        ("mapping", f"in ensemble {ensemble}, ensemble tensor {tensor} is mapping to non-existing input {key} in model {mname}")
        for key, tensor in input_map.items()
        if key not in inputs
    ]
    if problems:
        return problems
    for io in member_inputs:
        tensor = input_map.get(io.name)
        if tensor is None:
            if not io.optional:
                problems.append(
                    ("mapping", f"in ensemble {ensemble}, input {io.name} in model {mname} is not mapped to any ensemble tensors")
                )
            continue
        text = _merge(tensors, tensor, _node(mname, batching, io.data_type, io.dims), ensemble)
        if text:
            problems.append(("consistency", text))
    return problems


def _map_outputs(ensemble: str, mname: str, output_map: dict[str, str], member_outputs: list[ModelOutput], batching: bool,
                 tensors: dict[str, _TensorNode]) -> Problems:
    outputs = {io.name for io in member_outputs}
    problems: Problems = [
        ("mapping", f"in ensemble {ensemble}, ensemble tensor {tensor} is mapped from non-existing output {key} in model {mname}")
        for key, tensor in output_map.items()
        if key not in outputs
    ]
    if problems:
        return problems
    sibling = _TensorNode(mname)
    for key, tensor in output_map.items():
        matches = [io for io in member_outputs if io.name == key]
        for io in matches:
            text = _merge(tensors, tensor, _node(mname, batching, io.data_type, io.dims), ensemble)
            if text:
                problems.append(("consistency", text))
            tensors[tensor].sibling = sibling
        if len(matches) > 1:
            problems.append(
                ("mapping", f"in ensemble {ensemble}, multiple outputs in model {mname} are mapped to the same ensemble tensor {tensor}")
            )
    return problems


def _map_step(ensemble: str, step: ModelEnsembling.Step, mcfg: ModelConfig, tensors: dict[str, _TensorNode]) -> Problems:
    """Core's ValidateTensorMapping for one step; links the step's tensors into the graph."""
    mname = step.model_name
    batching = mcfg.max_batch_size > 0
    # Plain copies: protobuf maps and repeated fields are slow to walk, and each is walked several times.
    input_map, output_map = dict(step.input_map), dict(step.output_map)
    problems = _map_inputs(ensemble, mname, input_map, list(mcfg.input), batching, tensors)
    if problems:
        return problems
    problems = _map_outputs(ensemble, mname, output_map, list(mcfg.output), batching, tensors)
    if problems:
        return problems
    decoupled = mcfg.model_transaction_policy.decoupled
    for tensor in output_map.values():
        node = tensors[tensor]
        node.decoupled = decoupled
        for source in input_map.values():
            prev = tensors[source]
            node.prev.append(prev)
            prev.next.append(node)
    return []


def _decoupled_problem(ensemble: str, cfg: ModelConfig, tensors: dict[str, _TensorNode]) -> str | None:
    """Core's walk labelling tensors by the decoupled step they descend from; a step may not mix labels."""
    label = 0
    queue: deque[_TensorNode] = deque()
    for io in cfg.input:
        node = tensors[io.name]
        node.visited = True
        queue.append(node)
    while queue:
        current = queue.popleft()
        for nxt in current.next:
            if nxt.visited or not all(p.visited for p in nxt.prev):
                continue
            first = nxt.prev[0].label
            if any(p.label != first for p in nxt.prev):
                return f"in ensemble {ensemble}, step of model '{nxt.model}' receives inputs originated from different decoupled models"
            if nxt.sibling is not None:
                if nxt.sibling.visited:
                    nxt.label = nxt.sibling.label
                else:
                    if nxt.decoupled:
                        label += 1
                    nxt.label = label if nxt.decoupled else first
                    nxt.sibling.label = nxt.label
                    nxt.sibling.visited = True
            else:
                if nxt.decoupled:
                    label += 1
                nxt.label = label if nxt.decoupled else first
            nxt.visited = True
            queue.append(nxt)
    return None

