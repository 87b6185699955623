"""An ensemble's own config, its data flow and its members: stages one and two of core's checks.

Core: ``ValidateEnsembleSchedulingConfig`` and ``BuildEnsembleGraph`` (``ensemble_utils.cc``), the
dependency graph and ``CircularDependencyCheck`` of ``model_repository_manager.cc``. Triton stops at the
first failing stage, so each stage is judged only when the earlier ones pass.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from repo_builder.validate.analysis.memo import model_fact
from repo_builder.validate.analysis.positions import PathStep, placed
from repo_builder.validate.analysis.resolve import ENSEMBLE, config_name
from repo_builder.validate.analysis.versions import versions_to_load
from repo_builder.validate.records import Finding, ModelEntry, RuleContext

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelInput, ModelOutput

T = TypeVar("T")


def memo(what: str, model: ModelEntry, ctx: RuleContext, compute: Callable[[ModelEntry, RuleContext], T]) -> T:
    """A per-run result several rules share (the stages of an ensemble's judgement), kept on the context:
    it depends on the members and their verdicts, not on the ensemble's entry alone."""
    key = (what, id(model))
    hit = ctx.facts.get(key)
    if hit is not None and hit[0] is model:  # the entry itself is kept, so its id cannot be reused
        kept: T = hit[1]  # stored under this key by this function (typed without cast's call)
        return kept
    value = compute(model, ctx)
    ctx.facts[key] = (model, value)
    return value


def lookup(ctx: RuleContext, name: str) -> ModelEntry | None:
    return ctx.repository.model(name)


class Step(NamedTuple):
    """One step of an ensemble as plain Python values (a tuple: one is built per step of every ensemble)."""

    model_name: str
    model_version: int
    input_map: dict[str, str]  # in the proto map's order: Triton's texts name the first offender
    output_map: dict[str, str]


def steps(model: ModelEntry) -> tuple[Step, ...]:
    """The ensemble's steps, read out of the proto once per entry: every stage walks them several times,
    and each read of a proto map or sub-message builds a new wrapper object."""
    return model_fact(model, steps, _steps)


def _steps(model: ModelEntry) -> tuple[Step, ...]:
    assert model.config is not None  # an ensemble: its platform comes from its config
    out = []
    for step in model.config.ensemble_scheduling.step[:]:
        # Key by key: dict(proto_map) goes through collections.abc's Python-level views, twice as slow.
        ins, outs = step.input_map, step.output_map
        input_map = {}
        for k in ins:
            input_map[k] = ins[k]
        output_map = {}
        for k in outs:
            output_map[k] = outs[k]
        out.append(Step(step.model_name, step.model_version, input_map, output_map))
    return tuple(out)


def io_of(model: ModelEntry) -> tuple[tuple[ModelInput, ...], tuple[ModelOutput, ...]]:
    """The config's inputs and outputs (none without a config), kept on the entry: the stages walk them
    several times, and a kept message reads its fields without building a new wrapper."""
    return model_fact(model, io_of, _io_of)


def _io_of(model: ModelEntry) -> tuple[tuple[ModelInput, ...], tuple[ModelOutput, ...]]:
    cfg = model.config
    if cfg is None:
        return (), ()
    # Straight from the config: for a clean config the tensor rules no longer list its tensors (config_ios).
    return tuple(cfg.input[:]), tuple(cfg.output[:])


# What a problem is about: a path to its element in the ensemble's config.pbtxt (positions.element_at).
Where = tuple[PathStep, ...]
Problem = tuple[str, Where]  # (Triton's text, where)
SCHEDULING: Where = ("ensemble_scheduling",)


def step_at(index: int, *rest: PathStep) -> Where:
    """Step ``index`` of the ensemble (counting from 0, as Triton's texts do), then ``rest`` inside it."""
    return ("ensemble_scheduling", "step", index, *rest)


def located(model: ModelEntry, message: str, where: Where, hint: str | None = None) -> Finding:
    """A finding placed on the element ``where`` leads to (its deepest written part); unplaced when not
    even its first field is written (the engine then falls back to the rule's field)."""
    return placed(Finding(message, hint=hint), model.config_text, *where)


def scheduling_problems(model: ModelEntry) -> list[str]:
    """Core's ValidateEnsembleSchedulingConfig up to (not including) the data flow."""
    return [text for text, _ in _scheduling(model)]


def scheduling_findings(model: ModelEntry) -> list[Finding]:
    """``scheduling_problems``, each at the field or step it is about."""
    return [located(model, text, where) for text, where in _scheduling(model)]


def _scheduling(model: ModelEntry) -> tuple[Problem, ...]:
    # Stage one judges the entry alone: kept on it for the rules that report it and those that wait on it.
    return model_fact(model, _scheduling, _judge_scheduling)


def _judge_scheduling(model: ModelEntry) -> tuple[Problem, ...]:
    cfg = model.config
    assert cfg is not None  # an ensemble: its platform comes from its config
    name = config_name(model)
    if not cfg.HasField("ensemble_scheduling"):
        return ((f"ensemble scheduling must be set for ensemble {name} whose platform is {ENSEMBLE}", ()),)
    problems: list[Problem] = []
    if cfg.instance_group:
        problems.append((f"instance group should not be specified for ensemble '{name}'", ("instance_group",)))
    if cfg.HasField("optimization"):
        problems.append((f"optimization should not be specified for ensemble '{name}'", ("optimization",)))
    if cfg.model_warmup:
        problems.append((f"model_warmup can not be specified for ensemble '{name}'", ("model_warmup",)))
    step_list = steps(model)
    if not step_list:
        problems.append((f"must specify 'step' for ensemble '{name}'", SCHEDULING))
    for index, step in enumerate(step_list):
        # The first of the three a step lacks (Triton stops at it).
        lacking = (
            "model_name" if not step.model_name
            else "input_map" if not step.input_map
            else "output_map" if not step.output_map
            else None
        )
        if lacking is not None:
            problems.append((f"must specify '{lacking}' in step {index} of ensemble '{name}'", step_at(index)))
    return tuple(problems)


@dataclass(eq=False, slots=True)
class _FlowNode:
    name: str
    is_output: bool
    ready: bool = False
    prev: list[_FlowNode] = field(default_factory=list)
    next: list[_FlowNode] = field(default_factory=list)


def _build_flow(model: ModelEntry, name: str) -> dict[str, _FlowNode] | Problem:
    """The tensors and which step writes which (core's BuildEnsembleGraph), or Triton's error."""
    tensors: dict[str, _FlowNode] = {}
    for index, step in enumerate(steps(model)):
        written = []
        for tensor in step.output_map.values():
            node = tensors.get(tensor)
            if node is not None and node.is_output:
                return (
                    f"ensemble tensor '{tensor}' can appear in an output map only once for ensemble '{name}' step {index}",
                    step_at(index, "output_map", ("value", tensor), "value"),
                )
            if node is None:
                node = tensors[tensor] = _FlowNode(tensor, True)
            node.is_output = True
            written.append(node)
        for tensor in step.input_map.values():
            node = tensors.get(tensor)
            if node is None:
                node = tensors[tensor] = _FlowNode(tensor, False)
            for out in written:
                out.prev.append(node)
                node.next.append(out)
    return tensors


def _mark_ready(inputs: list[str], name: str, tensors: dict[str, _FlowNode]) -> list[Problem]:
    """Walk from the ensemble's inputs, marking every tensor that can be computed; unused inputs."""
    problems: list[Problem] = []
    queue: deque[_FlowNode] = deque()
    for tensor in inputs:
        node = tensors.get(tensor)
        if node is None:
            # Triton's text has a stray quote after the ensemble name; kept so log searches match.
            problems.append((f"ensemble input '{tensor}' for ensemble {name}' is not used", _io_name("input", tensor)))
            continue
        node.ready = True
        queue.append(node)
    while queue:
        for nxt in queue.popleft().next:
            if not nxt.ready and all(p.ready for p in nxt.prev):
                nxt.ready = True
                queue.append(nxt)
    return problems


def _io_name(kind: str, tensor: str) -> Where:
    return (kind, ("name", tensor), "name")


def tensor_entry(model: ModelEntry, tensor: str) -> Where:
    """The map entry that names ``tensor``: the step writing it, else the first step reading it."""
    for kind in ("output_map", "input_map"):
        for index, step in enumerate(steps(model)):
            if tensor in getattr(step, kind).values():
                return step_at(index, kind, ("value", tensor), "value")
    return SCHEDULING


def data_flow_problems(model: ModelEntry) -> list[str]:
    """Core's BuildEnsembleGraph and its readiness walk: every input used, every output written once."""
    return [text for text, _ in _data_flow(model)]


def data_flow_findings(model: ModelEntry) -> list[Finding]:
    """``data_flow_problems``, each at the tensor or map entry it is about."""
    return [located(model, text, where) for text, where in _data_flow(model)]


def _data_flow(model: ModelEntry) -> tuple[Problem, ...]:
    return model_fact(model, _data_flow, lambda m: tuple(_judge_data_flow(m)))


def _judge_data_flow(model: ModelEntry) -> list[Problem]:
    inputs, outputs_declared = io_of(model)
    if _flows_cleanly(steps(model), [io.name for io in inputs], [io.name for io in outputs_declared]):
        return []
    name = config_name(model)
    tensors = _build_flow(model, name)
    if isinstance(tensors, tuple):
        return [tensors]
    problems = _mark_ready([io.name for io in inputs], name, tensors)
    outputs = set()
    for io in outputs_declared:
        tensor = io.name
        node = tensors.get(tensor)
        if node is None:
            problems.append((f"ensemble output '{tensor}' for ensemble {name}' is not used", _io_name("output", tensor)))
        elif not node.ready:
            problems.append((_not_written(tensor, name, node), _io_name("output", tensor)))
        else:
            outputs.add(tensor)
    if problems:
        return problems
    return [
        (f"ensemble tensor '{t}' is unused in ensemble '{name}'", tensor_entry(model, t))
        for t, node in tensors.items()
        if t not in outputs and (not node.ready or not node.next)
    ]


def _flows_cleanly(step_list: tuple[Step, ...], inputs: list[str], outputs: list[str]) -> bool:
    """True only when the graph walk below finds nothing, decided without building it (the common case):
    every step, in order, reads only tensors already computed and writes tensors nobody else writes,
    every input is read or written, every output computed, every other written tensor read. When all
    steps run in one pass, every tensor is ready; anything else (a step waiting on a later one, an empty
    map) is left to the walk."""
    ready = set(inputs)
    read: set[str] = set()
    written: set[str] = set()
    for step in step_list:
        sources, targets = step.input_map.values(), step.output_map.values()
        if not sources or not targets or not ready.issuperset(sources):
            return False
        read.update(sources)
        for tensor in targets:
            if tensor in written:
                return False  # written twice: the walk reports it
            written.add(tensor)
        ready.update(targets)
    used = read | written
    return (
        used.issuperset(inputs)
        and used.issuperset(outputs)  # ready too: every used tensor is an input, read when ready, or written
        and written.difference(read).issubset(outputs)
    )


def _not_written(output: str, ensemble: str, node: _FlowNode) -> str:
    """Triton names the first unconnected tensor the output depends on."""
    message = f"output '{output}' for ensemble '{ensemble}' is not written"
    seen: set[str] = set()
    last, prev = node, node.prev
    while prev:
        candidates, prev = prev, []
        for p in candidates:
            if not p.ready and p.name not in seen:
                seen.add(p.name)
                last, prev = p, p.prev
                break
    if last is not node:
        message += f": at least one of its depending tensors, '{last.name}', is not connected"
    return message


def config_ok(model: ModelEntry) -> bool:
    """Stage one passed (a backend on an ensemble is reported by RB403 but stops Triton here too)."""
    return model_fact(model, config_ok, _config_ok)


def _config_ok(model: ModelEntry) -> bool:
    assert model.config is not None  # an ensemble: its platform comes from its config
    return not model.config.backend and not _scheduling(model) and not _data_flow(model)


def member_names(model: ModelEntry) -> tuple[str, ...]:
    """The members in the order of the steps that first run them."""
    return model_fact(model, member_names, lambda m: tuple(dict.fromkeys([step.model_name for step in steps(m)])))


class _Members(NamedTuple):
    entries: tuple[ModelEntry | None, ...]  # member_names' entries (None: no such model folder)
    missing: tuple[str, ...]  # sorted


def _members(model: ModelEntry, ctx: RuleContext) -> _Members:
    """The members looked up once per run: five rules and the tensor stage ask."""
    return memo("entries", model, ctx, _look_up_members)


def _look_up_members(model: ModelEntry, ctx: RuleContext) -> _Members:
    names = member_names(model)
    find = ctx.repository.model  # ``lookup`` without its own call
    entries = tuple([find(n) for n in names])
    if all(entries):  # an entry is always true: every member found (the common case)
        return _Members(entries, ())
    return _Members(entries, tuple(sorted([n for n, m in zip(names, entries, strict=True) if m is None])))


def member_entries(model: ModelEntry, ctx: RuleContext) -> tuple[ModelEntry | None, ...]:
    """``lookup`` of each of ``member_names``."""
    return _members(model, ctx).entries


def missing_members(model: ModelEntry, ctx: RuleContext) -> list[str]:
    return list(_members(model, ctx).missing)


def step_index(model: ModelEntry, member: str) -> int:
    """The first step that runs ``member`` (-1, placing nothing more precise than the steps, when none)."""
    return next((i for i, step in enumerate(steps(model)) if step.model_name == member), -1)


def member_finding(model: ModelEntry, message: str, member: str, hint: str | None = None) -> Finding:
    """A finding about a member, at the ``model_name`` of the first step that runs it."""
    index = step_index(model, member)
    return located(model, message, step_at(index, "model_name") if index >= 0 else SCHEDULING, hint)


def cycle(model: ModelEntry, ctx: RuleContext) -> str | None:
    """Triton's CircularDependencyCheck: 'start -> ... -> last -> start' when a path leads back here."""
    found = _cycle(model, ctx)
    return found[0] if found is not None else None


def cycle_finding(model: ModelEntry, ctx: RuleContext) -> Finding | None:
    """``cycle``'s text at the step whose member leads back to this ensemble."""
    found = _cycle(model, ctx)
    return member_finding(model, *found) if found is not None else None


def _cycle(model: ModelEntry, ctx: RuleContext) -> tuple[str, str] | None:
    return memo("cycle", model, ctx, _find_cycle)


def _find_cycle(model: ModelEntry, ctx: RuleContext) -> tuple[str, str] | None:
    """Depth-first over ensemble members (iterative: chains of nested ensembles can be long): Triton's text
    and the member of this ensemble the cycle goes through."""
    if model.name not in member_names(model) and not any(m is not None and m.is_ensemble for m in _members(model, ctx).entries):
        return None  # the walk below would stop at each member: none has members of its own
    start = config_name(model)
    seen: set[str] = set()
    stack: list[tuple[ModelEntry, str | None]] = [(model, None)]  # (entry, the direct member it was reached by)
    while stack:
        current, via = stack.pop()
        if not current.is_ensemble:  # the entry's kept `platform: "ensemble"`
            continue
        names = member_names(current)
        if model.name in names:
            return (
                f"circular dependency between ensembles: {start} -> ... -> {config_name(current)} -> {start}",
                via or model.name,
            )
        for member_name in reversed(names):
            member = lookup(ctx, member_name)
            if member is not None and member_name not in seen:
                seen.add(member_name)
                stack.append((member, via or member_name))
    return None


def _unloaded(step: Step, ctx: RuleContext) -> tuple[int, ...] | None:
    """The versions Triton loads of the step's member when they lack the one the step asks for."""
    if step.model_version == -1:  # the latest, whatever is loaded (checked first: no lookup)
        return None
    member = lookup(ctx, step.model_name)
    if member is None:
        return None
    loaded = versions_to_load(member)
    return loaded if loaded and step.model_version not in loaded else None


def versions_ok(model: ModelEntry, ctx: RuleContext) -> bool:
    """``version_problems`` finds nothing."""
    return all(_unloaded(step, ctx) is None for step in steps(model))


def version_problems(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    if versions_ok(model, ctx):
        return
    name = config_name(model)
    for index, step in enumerate(steps(model)):
        loaded = _unloaded(step, ctx)
        if loaded is None:
            continue
        hint = (
            "model_version 0 (which is also what an omitted model_version means) asks for a folder named 0; "
            "write model_version: -1 for the latest loaded version"
            if step.model_version == 0
            else f"loaded versions of '{step.model_name}': {', '.join(map(str, loaded))}; or write model_version: -1"
        )
        # An omitted model_version has no line of its own: the step is placed.
        yield located(
            model,
            f"ensemble '{name}' depends on '{step.model_name}' whose required version {step.model_version} is not loaded.",
            step_at(index, "model_version"),
            hint,
        )


def refused_members(model: ModelEntry, ctx: RuleContext) -> list[str]:
    return [n for n in member_names(model) if ctx.refused.get(n) and n != model.name]


def members_ok(model: ModelEntry, ctx: RuleContext) -> bool:
    """Stage two passed: Triton would go on to compare the tensors."""
    return memo("members", model, ctx, _judge_members)


def _judge_members(model: ModelEntry, ctx: RuleContext) -> bool:
    return (
        config_ok(model)
        and not _members(model, ctx).missing
        and cycle(model, ctx) is None
        and versions_ok(model, ctx)
        and not refused_members(model, ctx)
    )

