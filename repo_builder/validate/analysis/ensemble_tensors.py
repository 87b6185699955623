"""The tensors an ensemble passes between its members: stage three of core's checks.

Core: ``ValidateEnsembleConfig`` and ``ValidateTensorMapping`` (``ensemble_utils.cc``), judged only when
the ensemble's own config and its members pass (ensemble_graph.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from repo_builder.validate.analysis.autocomplete import backend_fills_io, io_autocompleted
from repo_builder.validate.analysis.bounded import name_list
from repo_builder.validate.analysis.ensemble_graph import (
    SCHEDULING,
    Where,
    located,
    lookup,
    member_finding,
    member_names,
    members_ok,
    memo,
    step_at,
    steps,
)
from repo_builder.validate.analysis.enums import enum_name
from repo_builder.validate.analysis.onnx_autocomplete import onnx_completed_config
from repo_builder.validate.analysis.positions import PathStep, element_at
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


@dataclass(frozen=True)
class _Written:
    """Where a side of an ensemble tensor is declared: the tensor entry in a config's text (the ensemble's
    own input or output, or the member's), and the ensemble's map entry that brings it in (None for the
    ensemble's own tensors)."""

    owner: ModelEntry
    tensor: Where  # path to the tensor in owner's config.pbtxt
    dims_field: str = "dims"  # "reshape" when the ensemble reads its input through a reshape
    entry: Where | None = None  # path to the step's map entry in the ensemble's config.pbtxt


@dataclass(eq=False)
class _TensorNode:
    """Core's TensorNode: the type and shape of one ensemble tensor and the model it came from."""

    model: str
    dtype: int = TYPE_INVALID
    dims: tuple[int, ...] = ()
    full_dims: tuple[int, ...] = ()
    written: _Written | None = None
    step: int = -1  # the step that writes it (RB511 places its finding there); -1: none
    decoupled: bool = False
    label: int = 0
    visited: bool = False
    prev: list[_TensorNode] = field(default_factory=list)
    next: list[_TensorNode] = field(default_factory=list)
    sibling: _TensorNode | None = None


def _node(model: str, batching: bool, dtype: int, dims: Iterable[int], written: _Written | None = None) -> _TensorNode:
    dims = tuple(dims)
    return _TensorNode(model, dtype, dims, ((-1,) if batching else ()) + dims, written)


def _dims_match(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    return len(a) == len(b) and all(x == y or WILDCARD in (x, y) for x, y in zip(a, b, strict=True))


def _dims_text(dims: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in dims) + "]"


def _consistency(existing: _TensorNode, new: _TensorNode, prefix: str) -> tuple[str, str] | None:
    """Triton's text when the two views of a tensor disagree, and the field they disagree on."""
    if existing.dtype != new.dtype:
        from tritonclient.grpc import model_config_pb2 as pb  # only for the message: most tensors agree

        return (
            f"{prefix}inconsistent data type: {enum_name(pb.DataType, existing.dtype)} is inferred from model "
            f"{existing.model} while {enum_name(pb.DataType, new.dtype)} is inferred from model {new.model}"
        ), "data_type"
    if not _dims_match(existing.dims, new.dims) and not _dims_match(existing.full_dims, new.full_dims):
        return (
            f"{prefix}inconsistent shape: {_dims_text(existing.full_dims)} is inferred from model {existing.model} "
            f"while {_dims_text(new.full_dims)} is inferred from model {new.model}"
        ), "dims"
    return None


def _field_at(side: _TensorNode, what: str) -> tuple[ModelEntry, tuple[int, int]] | None:
    """The config and position of ``what`` (dims or data_type) of one side, as written in its config.pbtxt;
    None when that side's tensors come from the model file (auto-complete) and no text holds them."""
    written = side.written
    if written is None:
        return None
    child = written.dims_field if what == "dims" else what
    found = element_at(written.owner.config_text, *written.tensor, child)
    if found is None or found.name != child:
        return None
    return written.owner, found.position


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _inconsistency(model: ModelEntry, root: Path, existing: _TensorNode, new: _TensorNode, text: str, what: str) -> Finding:
    """RB510 at the ``dims`` (or ``data_type``) that differ, the other side's place in the message: the
    ensemble's own declaration when it is one of the two sides, else the member that disagrees with what
    the graph holds already; the step's map entry when that member's tensors come from its model file."""
    first, second = (existing, new) if existing.written is not None and existing.written.owner is model else (new, existing)
    here = _field_at(first, what)
    there = _field_at(second, what)
    if there is not None:
        text += f" (model {second.model}'s {what}: {_relative(there[0].config_path, root)}:{there[1][0]})"
    if here is not None:
        owner, (line, column) = here
        return Finding(text, path=None if owner is model else owner.config_path, line=line, column=column)
    entry = first.written.entry if first.written is not None else None
    return located(model, text, entry or SCHEDULING)


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
        found = member_finding(
            model,
            f"ensemble '{name}': the inputs and outputs of {name_list(unknown)} come from the model file "
            "(auto-complete), so the tensor checks need the model file",
            unknown[0],
            hint="declare the member's inputs and outputs in its config.pbtxt to have them checked offline",
        )
        out.append(GraphFinding("mapping", replace(found, severity=Severity.INFO)))
    tensors: dict[str, _TensorNode] = {}
    io: ModelInput | ModelOutput  # the two loops below
    for io in cfg.input:
        reshaped = io.HasField("reshape")
        dims = io.reshape.shape if reshaped else io.dims
        written = _Written(model, ("input", ("name", io.name)), "reshape" if reshaped else "dims")
        tensors[io.name] = _node(name, batching, io.data_type, dims, written)
    sink = _TensorNode(name)
    for io in cfg.output:
        reshaped = io.HasField("reshape")
        dims = io.reshape.shape if reshaped else io.dims
        written = _Written(model, ("output", ("name", io.name)), "reshape" if reshaped else "dims")
        node = tensors.setdefault(io.name, _node(name, batching, io.data_type, dims, written))
        sink.prev.append(node)
        node.next.append(sink)

    for index, step in enumerate(steps(model)):
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
                    located(
                        model,
                        f"ensemble {name} allows maximum batch size {cfg.max_batch_size}, but it contains model "
                        f"{mname} which only allows maximum batch size to be {mcfg.max_batch_size}",
                        ("max_batch_size",),
                        hint=f"lower the ensemble's max_batch_size to {mcfg.max_batch_size} or raise the member's",
                    ),
                )
            )
        if mname in unknown:
            return out  # later steps would be judged against an incomplete graph
        problems = _map_step(_Step(model, ctx.repository.root, name, index, member), step, mcfg, tensors)
        hint = (
            f"'{mname}' has no config.pbtxt and auto-complete fills in no inputs or outputs for it (a model.py "
            "without auto_complete_config): write its config.pbtxt"
            if member.config is None and completed.get(mname) is None
            else None
        )
        out.extend(GraphFinding(stage, replace(finding, hint=hint) if hint else finding) for stage, finding in problems)
        if problems:
            return out
    problem = _decoupled_problem(name, cfg, tensors)
    if problem:
        text, index = problem  # the step that mixes the branches, else the ensemble's outputs
        out.append(GraphFinding("decoupled", located(model, text, step_at(index, "model_name") if index >= 0 else ("output",))))
    return out


Problems = list[tuple[str, Finding]]  # (stage, finding with Triton's text)


@dataclass(frozen=True)
class _Step:
    """The step being mapped: the ensemble, where its files are, its name and the step's index."""

    model: ModelEntry
    root: Path
    ensemble: str
    index: int
    member: ModelEntry

    def at(self, text: str, *where: PathStep) -> Finding:
        return located(self.model, text, step_at(self.index, *where))

    def side(self, kind: str, tensor: str) -> _Written:
        """The member's side of a tensor: its entry in the member's config, the step's map entry."""
        return _Written(
            self.member, (kind, ("name", tensor)), entry=step_at(self.index, f"{kind}_map", ("key", tensor), "key")
        )


def _merge(tensors: dict[str, _TensorNode], tensor: str, new: _TensorNode, step: _Step) -> Finding | None:
    """Add a member's view of ``tensor`` to the graph, or say how it contradicts the one already there."""
    if tensor not in tensors:
        tensors[tensor] = new
        return None
    existing = tensors[tensor]
    found = _consistency(existing, new, f"in ensemble {step.ensemble}, ensemble tensor {tensor}: ")
    if found is None:
        return None
    return _inconsistency(step.model, step.root, existing, new, *found)


def _map_inputs(step: _Step, input_map: dict[str, str], member_inputs: list[ModelInput], batching: bool,
                tensors: dict[str, _TensorNode]) -> Problems:
    ensemble, mname = step.ensemble, step.member.name
    inputs = {io.name for io in member_inputs}
    problems: Problems = [
        ("mapping", step.at(f"in ensemble {ensemble}, ensemble tensor {tensor} is mapping to non-existing input {key} "
                            f"in model {mname}", "input_map", ("key", key), "key"))
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
                    ("mapping", step.at(f"in ensemble {ensemble}, input {io.name} in model {mname} is not mapped to any "
                                        "ensemble tensors", "input_map"))
                )
            continue
        found = _merge(tensors, tensor, _node(mname, batching, io.data_type, io.dims, step.side("input", io.name)), step)
        if found:
            problems.append(("consistency", found))
    return problems


def _map_outputs(step: _Step, output_map: dict[str, str], member_outputs: list[ModelOutput], batching: bool,
                 tensors: dict[str, _TensorNode]) -> Problems:
    ensemble, mname = step.ensemble, step.member.name
    outputs = {io.name for io in member_outputs}
    problems: Problems = [
        ("mapping", step.at(f"in ensemble {ensemble}, ensemble tensor {tensor} is mapped from non-existing output {key} "
                            f"in model {mname}", "output_map", ("key", key), "key"))
        for key, tensor in output_map.items()
        if key not in outputs
    ]
    if problems:
        return problems
    sibling = _TensorNode(mname)
    for key, tensor in output_map.items():
        matches = [io for io in member_outputs if io.name == key]
        for io in matches:
            found = _merge(tensors, tensor, _node(mname, batching, io.data_type, io.dims, step.side("output", key)), step)
            if found:
                problems.append(("consistency", found))
            tensors[tensor].sibling = sibling
        if len(matches) > 1:
            problems.append(
                ("mapping", step.at(f"in ensemble {ensemble}, multiple outputs in model {mname} are mapped to the same "
                                    f"ensemble tensor {tensor}", "output_map", ("key", key), "key"))
            )
    return problems


def _map_step(where: _Step, step: ModelEnsembling.Step, mcfg: ModelConfig, tensors: dict[str, _TensorNode]) -> Problems:
    """Core's ValidateTensorMapping for one step; links the step's tensors into the graph."""
    batching = mcfg.max_batch_size > 0
    # Plain copies: protobuf maps and repeated fields are slow to walk, and each is walked several times.
    input_map, output_map = dict(step.input_map), dict(step.output_map)
    problems = _map_inputs(where, input_map, list(mcfg.input), batching, tensors)
    if problems:
        return problems
    problems = _map_outputs(where, output_map, list(mcfg.output), batching, tensors)
    if problems:
        return problems
    decoupled = mcfg.model_transaction_policy.decoupled
    for tensor in output_map.values():
        node = tensors[tensor]
        node.decoupled = decoupled
        node.step = where.index
        for source in input_map.values():
            prev = tensors[source]
            node.prev.append(prev)
            prev.next.append(node)
    return []


def _decoupled_problem(ensemble: str, cfg: ModelConfig, tensors: dict[str, _TensorNode]) -> tuple[str, int] | None:
    """Core's walk labelling tensors by the decoupled step they descend from; a step may not mix labels.
    Triton's text and the step's index (-1 when the branches meet only at the ensemble's outputs)."""
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
                return (
                    f"in ensemble {ensemble}, step of model '{nxt.model}' receives inputs originated from different "
                    "decoupled models",
                    nxt.step,
                )
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

