"""The tensors an ensemble passes between its members: stage three of core's checks.

Core: ``ValidateEnsembleConfig`` and ``ValidateTensorMapping`` (``ensemble_utils.cc``), judged only when
the ensemble's own config and its members pass (ensemble_graph.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, cast

from repo_builder.validate.analysis.autocomplete import backend_fills_io, io_autocompleted
from repo_builder.validate.analysis.bounded import name_list
from repo_builder.validate.analysis.ensemble_graph import (
    SCHEDULING,
    Step,
    Where,
    io_of,
    located,
    member_entries,
    member_finding,
    member_names,
    members_ok,
    memo,
    step_at,
    steps,
)
from repo_builder.validate.analysis.enums import enum_name
from repo_builder.validate.analysis.memo import model_fact
from repo_builder.validate.analysis.onnx_autocomplete import onnx_completed_config
from repo_builder.validate.analysis.positions import PathStep, element_at
from repo_builder.validate.analysis.resolve import config_name
from repo_builder.validate.analysis.shapes import TYPE_INVALID, WILDCARD
from repo_builder.validate.records import Finding, ModelEntry, RuleContext, Severity

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInput, ModelOutput


class _Written(NamedTuple):
    """Where a side of an ensemble tensor is declared: the tensor entry ``kind`` (input or output) named
    ``name`` in ``owner``'s config.pbtxt (the ensemble's own, or the member's), and the step whose map entry
    brings it in (-1 for the ensemble's own tensors). A tuple, paths built only for a finding: one is made
    per tensor of every ensemble."""

    owner: ModelEntry
    kind: str  # "input" | "output"
    name: str
    dims_field: str = "dims"  # "reshape" when the ensemble reads its input through a reshape
    step: int = -1

    @property
    def tensor(self) -> Where:
        """Path to the tensor in the owner's config.pbtxt."""
        return (self.kind, ("name", self.name))

    @property
    def entry(self) -> Where | None:
        """Path to the step's map entry in the ensemble's config.pbtxt (None: the ensemble's own tensor)."""
        return step_at(self.step, f"{self.kind}_map", ("key", self.name), "key") if self.step >= 0 else None


@dataclass(eq=False, slots=True)
class _TensorNode:
    """Core's TensorNode: the type and shape of one ensemble tensor and the model it came from."""

    model: str
    batching: bool = False  # the model batches: Triton also compares the dims with the batch dimension added
    dtype: int = TYPE_INVALID
    dims: tuple[int, ...] = ()
    written: _Written | None = None
    step: int = -1  # the step that writes it (RB511 places its finding there); -1: none
    decoupled: bool = False
    label: int = 0
    visited: bool = False
    prev: list[_TensorNode] = field(default_factory=list)
    next: list[_TensorNode] = field(default_factory=list)
    sibling: _TensorNode | None = None

    @property
    def full_dims(self) -> tuple[int, ...]:
        return ((-1,) if self.batching else ()) + self.dims


class _Tensor(NamedTuple):
    """A member's input or output, read out of its config once."""

    name: str
    dtype: int
    dims: tuple[int, ...]
    optional: bool  # inputs only


View = tuple[int, tuple[int, ...]]  # a tensor's (data_type, dims): equal views always agree


class _Io(NamedTuple):
    """What the mapping checks read of a member's config: protobuf fields cost a wrapper object per read."""

    max_batch_size: int
    # The config's own entries: only the full walk reads them again (as _Tensors, ``_tensors``).
    inputs: Sequence[ModelInput]
    outputs: Sequence[ModelOutput]
    decoupled: bool
    complete: bool  # some inputs and outputs, each with its data_type and dims
    # By name, for the quick test (_maps_cleanly); None when two tensors share a name (the full walk judges).
    input_views: dict[str, View] | None
    output_views: dict[str, View] | None


_NO_IO = _Io(0, (), (), False, False, {}, {})  # a config as empty as written: auto-complete adds no tensors, no batching


def _io(cfg: ModelConfig, inputs: Sequence[ModelInput], outputs: Sequence[ModelOutput]) -> _Io:
    in_views, complete_ins = _views(inputs)
    out_views, complete_outs = _views(outputs)
    return _Io(
        cfg.max_batch_size,
        inputs,
        outputs,
        cfg.model_transaction_policy.decoupled,
        complete_ins and complete_outs,
        in_views if len(in_views) == len(inputs) else None,
        out_views if len(out_views) == len(outputs) else None,
    )


def _views(tensors: Sequence[ModelInput] | Sequence[ModelOutput]) -> tuple[dict[str, View], bool]:
    """Each tensor's view by name, and whether there are some, each with a data_type and dims."""
    views: dict[str, View] = {}
    complete = bool(tensors)
    for t in tensors:
        # dims[:] copies the repeated field in C: tuple() over the container steps through it in Python.
        dtype, dims = t.data_type, tuple(t.dims[:])
        views[t.name] = (dtype, dims)
        if dtype == TYPE_INVALID or not dims:
            complete = False
    return views, complete


def _tensors(tensors: Sequence[ModelInput] | Sequence[ModelOutput], inputs: bool) -> tuple[_Tensor, ...]:
    """The full walk's view of a member's inputs (``inputs``) or outputs."""
    return tuple(
        [_Tensor(t.name, t.data_type, tuple(t.dims[:]), inputs and t.optional) for t in tensors]  # type: ignore[union-attr]
    )


def _member_io(member: ModelEntry) -> _Io:
    """``_io`` of the member's own config (not None), kept on the entry: two stages read it. Its tensors
    are read straight from the config: for a clean member no other rule has listed them."""
    return model_fact(member, _member_io, _read_member_io)


def _read_member_io(member: ModelEntry) -> _Io:
    cfg = cast("ModelConfig", member.config)
    return _io(cfg, cfg.input[:], cfg.output[:])


def _dims_match(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    if a == b:  # the common case, and what the loop below concludes for equal shapes
        return True
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
    if member.config is None:
        if ctx.options.strict or member.has_config_file:
            return True  # refused before the tensors matter (RB105, RB201)
        return not backend_fills_io(member)
    # Every tensor declared in full: final whatever auto-complete may do (the cheap test first).
    return _member_io(member).complete or not io_autocompleted(member, ctx)


@dataclass(frozen=True)
class GraphFinding:
    stage: str  # "batch" | "mapping" | "consistency" | "decoupled"
    finding: Finding


def analyze_tensors(model: ModelEntry, ctx: RuleContext) -> list[GraphFinding]:
    """Core's ValidateEnsembleConfig over the scanned configs (only when stages one and two pass)."""
    return memo("tensors", model, ctx, _analyze_tensors)


def _member_ios(
    model: ModelEntry, ctx: RuleContext
) -> tuple[dict[str, ModelEntry], dict[str, _Io], dict[str, ModelConfig | None]]:
    """Each member's entry and the tensors core judges it by, and the members whose tensors come from their
    model file: completed from the ONNX graph when that can be read (core judges the ensemble against each
    member's completed config), else None (unknown)."""
    members: dict[str, ModelEntry] = {}
    completed: dict[str, ModelConfig | None] = {}
    ios: dict[str, _Io] = {}
    for n, m in zip(member_names(model), member_entries(model, ctx), strict=True):
        assert m is not None  # members_ok: every member exists
        members[n] = m
        if m.config is not None:
            io = _member_io(m)
            if io.complete:  # member_io_final's first test, without a second look-up
                ios[n] = io
                continue
        c = None
        if not member_io_final(m, ctx):
            c = completed[n] = onnx_completed_config(m, ctx)
        ios[n] = _io(c, c.input[:], c.output[:]) if c is not None else _member_io(m) if m.config is not None else _NO_IO
    return members, ios, completed


def _analyze_tensors(model: ModelEntry, ctx: RuleContext) -> list[GraphFinding]:
    if not members_ok(model, ctx):
        return []
    cfg = model.config
    assert cfg is not None  # an ensemble: its platform comes from its config
    members, ios, completed = _member_ios(model, ctx)
    unknown = [n for n, c in completed.items() if c is None]
    if not unknown and _maps_cleanly(model, cfg.max_batch_size, ios):
        return []
    name = config_name(model)
    out: list[GraphFinding] = []
    if unknown:
        found = member_finding(
            model,
            f"ensemble '{name}': the inputs and outputs of {name_list(unknown)} come from the model file "
            "(auto-complete), so the tensor checks need the model file",
            unknown[0],
            hint="declare the member's inputs and outputs in its config.pbtxt to have them checked offline",
        )
        out.append(GraphFinding("mapping", replace(found, severity=Severity.INFO)))
    # Without a decoupled member every tensor carries the same label: the decoupled walk cannot fail, so
    # the links it follows (core's prev/next/sibling) are not built.
    link = any(io.decoupled for io in ios.values())
    tensors, inputs = _ensemble_tensors(model, cfg, name, link)
    for index, step in enumerate(steps(model)):
        mname = step.model_name
        member = members[mname]
        mcfg = completed.get(mname)
        if mcfg is None and member.config is None and mname in unknown:
            return out
        io = ios[mname]
        if io.max_batch_size != 0 and io.max_batch_size < cfg.max_batch_size:
            out.append(
                GraphFinding(
                    "batch",
                    located(
                        model,
                        f"ensemble {name} allows maximum batch size {cfg.max_batch_size}, but it contains model "
                        f"{mname} which only allows maximum batch size to be {io.max_batch_size}",
                        ("max_batch_size",),
                        hint=f"lower the ensemble's max_batch_size to {io.max_batch_size} or raise the member's",
                    ),
                )
            )
        if mname in unknown:
            return out  # later steps would be judged against an incomplete graph
        problems = _map_step(_Step(model, ctx.repository.root, name, index, member, link), step, io, tensors)
        if problems:
            hint = (
                f"'{mname}' has no config.pbtxt and auto-complete fills in no inputs or outputs for it (a model.py "
                "without auto_complete_config): write its config.pbtxt"
                if member.config is None and mcfg is None
                else None
            )
            out.extend(GraphFinding(stage, replace(finding, hint=hint) if hint else finding) for stage, finding in problems)
            return out
    problem = _decoupled_problem(name, inputs, tensors) if link else None
    if problem:
        text, index = problem  # the step that mixes the branches, else the ensemble's outputs
        out.append(GraphFinding("decoupled", located(model, text, step_at(index, "model_name") if index >= 0 else ("output",))))
    return out


def _maps_cleanly(model: ModelEntry, max_batch_size: int, ios: dict[str, _Io]) -> bool:
    """True only when the walk below finds nothing, decided on plain values (the common case): no
    decoupled member, no member batching less than the ensemble, each step mapping every input of its
    member and only tensors it has, and every ensemble tensor seen with one data type and one shape
    everywhere. Anything else (an optional input left out, a wildcard or batch dimension to match)
    is left to the walk."""
    for member in ios.values():
        if member.decoupled or (member.max_batch_size != 0 and member.max_batch_size < max_batch_size):
            return False
    views = _own_views(model)
    for step in steps(model):
        member = ios[step.model_name]
        member_inputs, member_outputs = member.input_views, member.output_views
        if member_inputs is None or member_outputs is None or len(step.input_map) != len(member_inputs):
            return False
        for maps, member_views in ((step.input_map, member_inputs), (step.output_map, member_outputs)):
            for key, tensor in maps.items():
                view = member_views.get(key)
                if view is None or views.setdefault(tensor, view) != view:
                    return False
    return True


def _own_views(model: ModelEntry) -> dict[str, View]:
    """The ensemble's own tensors as the walk starts from them (_ensemble_tensors): the last input of a
    name, else the first output; the reshape where there is one."""
    declared_inputs, declared_outputs = io_of(model)
    views: dict[str, View] = {
        t.name: (t.data_type, tuple((t.reshape.shape if t.HasField("reshape") else t.dims)[:])) for t in declared_inputs
    }
    for t in declared_outputs:
        if t.name not in views:
            views[t.name] = (t.data_type, tuple((t.reshape.shape if t.HasField("reshape") else t.dims)[:]))
    return views


def _ensemble_tensors(model: ModelEntry, cfg: ModelConfig, name: str, link: bool) -> tuple[dict[str, _TensorNode], list[str]]:
    """The graph's start: the ensemble's own inputs and outputs (with ``link``, the outputs linked to a
    sink node), and the names of its inputs in their order, where the decoupled walk starts."""
    batching = cfg.max_batch_size > 0
    tensors: dict[str, _TensorNode] = {}
    inputs: list[str] = []
    io: ModelInput | ModelOutput  # the two loops below
    declared_inputs, declared_outputs = io_of(model)
    for io in declared_inputs:
        reshaped = io.HasField("reshape")
        dims = io.reshape.shape if reshaped else io.dims
        tname = io.name
        written = _Written(model, "input", tname, "reshape" if reshaped else "dims")
        tensors[tname] = _TensorNode(name, batching, io.data_type, tuple(dims[:]), written)
        inputs.append(tname)
    sink = _TensorNode(name)
    for io in declared_outputs:
        tname = io.name
        node = tensors.get(tname)
        if node is None:
            reshaped = io.HasField("reshape")
            dims = io.reshape.shape if reshaped else io.dims
            written = _Written(model, "output", tname, "reshape" if reshaped else "dims")
            node = tensors[tname] = _TensorNode(name, batching, io.data_type, tuple(dims[:]), written)
        if link:
            sink.prev.append(node)
            node.next.append(sink)
    return tensors, inputs


Problems = list[tuple[str, Finding]]  # (stage, finding with Triton's text)


class _Step(NamedTuple):
    """The step being mapped: the ensemble, where its files are, its name and the step's index."""

    model: ModelEntry
    root: Path
    ensemble: str
    number: int  # the step's index (not `index`: a tuple method)
    member: ModelEntry
    link: bool  # build the links of the decoupled walk

    def at(self, text: str, *where: PathStep) -> Finding:
        return located(self.model, text, step_at(self.number, *where))


def _merge(tensors: dict[str, _TensorNode], tensor: str, step: _Step, kind: str, io: _Tensor, batching: bool) -> Finding | None:
    """Add a member's view (its input or output ``io``) of ``tensor`` to the graph, or say how it
    contradicts the one already there."""
    existing = tensors.get(tensor)
    if existing is not None and existing.dtype == io.dtype and existing.dims == io.dims:
        return None  # the same type and shape: consistent, nothing to add (the common case)
    new = _TensorNode(step.member.name, batching, io.dtype, io.dims, _Written(step.member, kind, io.name, step=step.number))
    if existing is None:
        tensors[tensor] = new
        return None
    found = _consistency(existing, new, f"in ensemble {step.ensemble}, ensemble tensor {tensor}: ")
    if found is None:
        return None
    return _inconsistency(step.model, step.root, existing, new, *found)


def _map_inputs(step: _Step, input_map: dict[str, str], member_inputs: tuple[_Tensor, ...], batching: bool,
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
        found = _merge(tensors, tensor, step, "input", io, batching)
        if found:
            problems.append(("consistency", found))
    return problems


def _map_outputs(step: _Step, output_map: dict[str, str], member_outputs: tuple[_Tensor, ...], batching: bool,
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
    sibling = _TensorNode(mname) if step.link else None
    for key, tensor in output_map.items():
        matches = [io for io in member_outputs if io.name == key]
        for io in matches:
            found = _merge(tensors, tensor, step, "output", io, batching)
            if found:
                problems.append(("consistency", found))
            if sibling is not None:
                tensors[tensor].sibling = sibling
        if len(matches) > 1:
            problems.append(
                ("mapping", step.at(f"in ensemble {ensemble}, multiple outputs in model {mname} are mapped to the same "
                                    f"ensemble tensor {tensor}", "output_map", ("key", key), "key"))
            )
    return problems


def _map_step(where: _Step, step: Step, io: _Io, tensors: dict[str, _TensorNode]) -> Problems:
    """Core's ValidateTensorMapping for one step; links the step's tensors into the graph."""
    batching = io.max_batch_size > 0
    input_map, output_map = step.input_map, step.output_map
    problems = _map_inputs(where, input_map, _tensors(io.inputs, True), batching, tensors)
    if problems:
        return problems
    problems = _map_outputs(where, output_map, _tensors(io.outputs, False), batching, tensors)
    if problems or not where.link:
        return problems
    decoupled = io.decoupled
    sources = [tensors[source] for source in input_map.values()]
    for tensor in output_map.values():
        node = tensors[tensor]
        node.decoupled = decoupled
        node.step = where.number
        for prev in sources:
            node.prev.append(prev)
            prev.next.append(node)
    return []


def _decoupled_problem(ensemble: str, inputs: list[str], tensors: dict[str, _TensorNode]) -> tuple[str, int] | None:
    """Core's walk labelling tensors by the decoupled step they descend from; a step may not mix labels.
    Triton's text and the step's index (-1 when the branches meet only at the ensemble's outputs)."""
    label = 0
    queue: deque[_TensorNode] = deque()
    for tensor in inputs:
        node = tensors[tensor]
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

