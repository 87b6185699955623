"""Rules RB5xx: ensembles (core's ValidateEnsembleSchedulingConfig, the dependency graph of
model_repository_manager.cc, and ValidateEnsembleConfig of ensemble_utils.cc), with Triton's own texts.

Triton checks an ensemble in three stages and stops at the first failure of each: its own config
(steps and data flow), then its members (present, loaded in the required version, valid, no cycles),
then the tensors it passes between members (names, data types, shapes, batch sizes, decoupled
branches). These rules keep that order: a later stage is only judged when the earlier ones pass, so one
mistake yields one diagnostic, not a cascade.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule
from repo_builder.validate.rules.config import (
    TYPE_INVALID,
    WILDCARD,
    backend_fills_io,
    config_name,
    io_autocompleted,
)
from repo_builder.validate.rules.layout import versions_to_load

ENSEMBLE = "ensemble"
T = TypeVar("T")


def _memo(what: str, model: ModelEntry, ctx: RuleContext, compute: Callable[[], T]) -> T:
    """A per-run result several rules share (the stages of an ensemble's judgement), kept on the context:
    it depends on the members and their verdicts, not on the ensemble's entry alone."""
    key = (what, id(model))
    hit = ctx.facts.get(key)
    if hit is not None and hit[0] is model:  # the entry itself is kept, so its id cannot be reused
        return hit[1]
    value = compute()
    ctx.facts[key] = (model, value)
    return value


def _lookup(ctx: RuleContext, name: str) -> ModelEntry | None:
    return ctx.repository.model(name)


def _steps(model: ModelEntry) -> list:
    return list(model.config.ensemble_scheduling.step)


def scheduling_problems(model: ModelEntry) -> list[str]:
    """Core's ValidateEnsembleSchedulingConfig up to (not including) the data flow."""
    cfg = model.config
    name = config_name(model)
    if not cfg.HasField("ensemble_scheduling"):
        return [f"ensemble scheduling must be set for ensemble {name} whose platform is {ENSEMBLE}"]
    problems = []
    if cfg.instance_group:
        problems.append(f"instance group should not be specified for ensemble '{name}'")
    if cfg.HasField("optimization"):
        problems.append(f"optimization should not be specified for ensemble '{name}'")
    if cfg.model_warmup:
        problems.append(f"model_warmup can not be specified for ensemble '{name}'")
    steps = _steps(model)
    if not steps:
        problems.append(f"must specify 'step' for ensemble '{name}'")
    for index, step in enumerate(steps):
        for what, present in (
            ("model_name", bool(step.model_name)),
            ("input_map", len(step.input_map) > 0),
            ("output_map", len(step.output_map) > 0),
        ):
            if not present:
                problems.append(f"must specify '{what}' in step {index} of ensemble '{name}'")
                break
    return problems


@dataclass(eq=False)
class _FlowNode:
    name: str
    is_output: bool
    ready: bool = False
    prev: list[_FlowNode] = field(default_factory=list)
    next: list[_FlowNode] = field(default_factory=list)


def data_flow_problems(model: ModelEntry) -> list[str]:
    """Core's BuildEnsembleGraph and its readiness walk: every input used, every output written once."""
    cfg = model.config
    name = config_name(model)
    tensors: dict[str, _FlowNode] = {}
    for index, step in enumerate(_steps(model)):
        written = []
        for tensor in step.output_map.values():
            node = tensors.get(tensor)
            if node is not None and node.is_output:
                return [
                    f"ensemble tensor '{tensor}' can appear in an output map only once for ensemble '{name}' step {index}"
                ]
            if node is None:
                node = tensors[tensor] = _FlowNode(tensor, True)
            node.is_output = True
            written.append(node)
        for tensor in step.input_map.values():
            node = tensors.setdefault(tensor, _FlowNode(tensor, False))
            for out in written:
                out.prev.append(node)
                node.next.append(out)
    problems = []
    queue: deque[_FlowNode] = deque()
    for io in cfg.input:
        node = tensors.get(io.name)
        if node is None:
            # Triton's text has a stray quote after the ensemble name; kept so log searches match.
            problems.append(f"ensemble input '{io.name}' for ensemble {name}' is not used")
            continue
        node.ready = True
        queue.append(node)
    while queue:
        for nxt in queue.popleft().next:
            if not nxt.ready and all(p.ready for p in nxt.prev):
                nxt.ready = True
                queue.append(nxt)
    outputs = set()
    for io in cfg.output:
        node = tensors.get(io.name)
        if node is None:
            problems.append(f"ensemble output '{io.name}' for ensemble {name}' is not used")
        elif not node.ready:
            problems.append(_not_written(io.name, name, node))
        else:
            outputs.add(io.name)
    if problems:
        return problems
    return [
        f"ensemble tensor '{t}' is unused in ensemble '{name}'"
        for t, node in tensors.items()
        if t not in outputs and (not node.ready or not node.next)
    ]


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


def _config_ok(model: ModelEntry) -> bool:
    """Stage one passed (a backend on an ensemble is reported by RB403 but stops Triton here too)."""
    facts = model.facts
    ok = facts.get(_config_ok)
    if ok is None:
        ok = facts[_config_ok] = (
            not model.config.backend and not scheduling_problems(model) and not data_flow_problems(model)
        )
    return ok


def _member_names(model: ModelEntry) -> list[str]:
    names: list[str] = []
    for step in _steps(model):
        if step.model_name not in names:
            names.append(step.model_name)
    return names


def _missing_members(model: ModelEntry, ctx: RuleContext) -> list[str]:
    return sorted(n for n in _member_names(model) if _lookup(ctx, n) is None)


def _cycle(model: ModelEntry, ctx: RuleContext) -> str | None:
    """Triton's CircularDependencyCheck: 'start -> ... -> last -> start' when a path leads back here."""
    return _memo("cycle", model, ctx, lambda: _find_cycle(model, ctx))


def _find_cycle(model: ModelEntry, ctx: RuleContext) -> str | None:
    """Depth-first over ensemble members (iterative: chains of nested ensembles can be long)."""
    start = config_name(model)
    seen: set[str] = set()
    stack = [model]
    while stack:
        current = stack.pop()
        if current.config is None or current.config.platform != ENSEMBLE:
            continue
        names = _member_names(current)
        if model.name in names:
            return (
                f"circular dependency between ensembles: {start} -> ... -> {config_name(current)} -> {start}"
            )
        for member_name in reversed(names):
            member = _lookup(ctx, member_name)
            if member is not None and member_name not in seen:
                seen.add(member_name)
                stack.append(member)
    return None


def _version_problems(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    name = config_name(model)
    for step in _steps(model):
        member = _lookup(ctx, step.model_name)
        if member is None or step.model_version == -1:
            continue
        loaded = versions_to_load(member)
        if not loaded or step.model_version in loaded:
            continue
        hint = (
            "model_version 0 (which is also what an omitted model_version means) asks for a folder named 0; "
            "write model_version: -1 for the latest loaded version"
            if step.model_version == 0
            else f"loaded versions of '{step.model_name}': {', '.join(map(str, loaded))}; or write model_version: -1"
        )
        yield Finding(
            f"ensemble '{name}' depends on '{step.model_name}' whose required version {step.model_version} is not loaded.",
            hint=hint,
        )


def _refused_members(model: ModelEntry, ctx: RuleContext) -> list[str]:
    return [n for n in _member_names(model) if ctx.refused.get(n) and n != model.name]


def _members_ok(model: ModelEntry, ctx: RuleContext) -> bool:
    """Stage two passed: Triton would go on to compare the tensors."""
    return _memo("members", model, ctx, lambda: _judge_members(model, ctx))


def _judge_members(model: ModelEntry, ctx: RuleContext) -> bool:
    return (
        _config_ok(model)
        and not _missing_members(model, ctx)
        and _cycle(model, ctx) is None
        and not any(True for _ in _version_problems(model, ctx))
        and not _refused_members(model, ctx)
    )


@rule("RB501", "ensemble-scheduling-platform")
def check_scheduling_platform(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Only a model with `platform: "ensemble"` may have `ensemble_scheduling`.

    Triton: "ensemble scheduling cannot be set for model 'M' whose platform is not ensemble".

    Fails: `backend: "python"` with an `ensemble_scheduling` block. Passes: `platform: "ensemble"`.
    """
    cfg = model.config
    if cfg is not None and cfg.HasField("ensemble_scheduling") and cfg.platform != ENSEMBLE:
        yield Finding(
            f"ensemble scheduling cannot be set for model '{config_name(model)}' whose platform is not {ENSEMBLE}"
        )


@rule("RB502", "ensemble-config", ensemble_only=True)
def check_ensemble_config(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """An ensemble has `ensemble_scheduling` with steps, and no per-instance settings.

    Triton: "ensemble scheduling must be set for ensemble E whose platform is ensemble", "instance group should not be
    specified for ensemble 'E'", "optimization should not be specified ...", "model_warmup can not be
    specified ...", "must specify 'step' for ensemble 'E'", "must specify 'model_name' | 'input_map' |
    'output_map' in step N of ensemble 'E'" (steps count from 0). A `backend:` on an ensemble is RB403.

    Fails: an ensemble with `instance_group [ { kind: KIND_CPU } ]`. Passes: remove it (the members
    have instances; the ensemble has none).
    """
    for problem in scheduling_problems(model):
        yield Finding(problem)


@rule("RB503", "ensemble-data-flow", ensemble_only=True)
def check_data_flow(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Every ensemble input feeds a step, every output is written, and every tensor flows somewhere.

    Triton: "ensemble tensor 'T' can appear in an output map only once for ensemble 'E' step N",
    "ensemble input 'X' for ensemble E' is not used", "ensemble output 'Y' for ensemble E' is not used",
    "output 'Y' for ensemble 'E' is not written[: at least one of its depending tensors, 'T', is not
    connected]", "ensemble tensor 'T' is unused in ensemble 'E'" (a tensor nobody reads, or one that can
    never be computed from the inputs).

    Fails: an output `prob` that no step's `output_map` writes. Passes: a step maps a member output to `prob`.
    """
    if scheduling_problems(model):
        return
    for problem in data_flow_problems(model):
        yield Finding(problem)


@rule("RB504", "ensemble-members-exist", ensemble_only=True)
def check_members_exist(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Every step's `model_name` is a model folder of the repository.

    Triton: "ensemble E contains models that are not available or ambiguous: M1, M2".

    Fails: a step naming `preprocess` with no `preprocess/` folder. Passes: the folder exists.
    """
    if not _config_ok(model):
        return
    missing = _missing_members(model, ctx)
    if missing:
        yield Finding(
            f"ensemble {config_name(model)} contains models that are not available or ambiguous: {', '.join(missing)}",
            hint="model_name must equal a model folder name in this repository",
        )


@rule("RB505", "ensemble-cycles", ensemble_only=True)
def check_cycles(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Ensembles may contain ensembles, but never themselves, directly or through others.

    Triton: "circular dependency between ensembles: A -> ... -> B -> A".

    Fails: ensemble `a` has a step `b`, ensemble `b` a step `a`. Passes: `b` uses a plain model.
    """
    if not _config_ok(model):
        return
    cycle = _cycle(model, ctx)
    if cycle:
        yield Finding(cycle)


@rule("RB506", "ensemble-member-versions", ensemble_only=True)
def check_member_versions(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A step's `model_version` is -1 (latest loaded) or a version Triton loads for that member.

    Triton: "ensemble 'E' depends on 'M' whose required version V is not loaded." The loaded versions
    follow the member's `version_policy` (default: only the latest). An omitted `model_version` is 0,
    not "latest": it needs a version folder named `0`; write `model_version: -1`.

    Fails: `model_version: 2` while the member only has `1/`. Passes: `model_version: -1`.
    """
    if not _config_ok(model) or _missing_members(model, ctx):
        return
    yield from _version_problems(model, ctx)


@rule("RB507", "ensemble-member-refused", ensemble_only=True)
def check_member_refused(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """An ensemble whose member Triton refuses is refused too.

    Triton: "ensemble 'E' depends on 'M' which is not valid. Model 'M' failed with error: ...". The
    member's own diagnostics say why; members are judged before their ensembles.

    Fails: a member with a config error. Passes: every member validates cleanly.
    """
    if not _config_ok(model) or _missing_members(model, ctx) or _cycle(model, ctx):
        return
    name = config_name(model)
    for member in _refused_members(model, ctx):
        yield Finding(
            f"ensemble '{name}' depends on '{member}' which is not valid",
            hint=f"fix the errors reported for model '{member}'",
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
            f"{prefix}inconsistent data type: {pb.DataType.Name(existing.dtype)} is inferred from model "
            f"{existing.model} while {pb.DataType.Name(new.dtype)} is inferred from model {new.model}"
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
    tensors = [*cfg.input, *cfg.output]
    return (
        bool(cfg.input) and bool(cfg.output) and all(t.data_type != TYPE_INVALID and t.dims for t in tensors)
    )


@dataclass(frozen=True)
class _GraphFinding:
    stage: str  # "batch" | "mapping" | "consistency" | "decoupled"
    finding: Finding


def analyze_tensors(model: ModelEntry, ctx: RuleContext) -> list[_GraphFinding]:
    """Core's ValidateEnsembleConfig over the scanned configs (only when stages one and two pass)."""
    return _memo("tensors", model, ctx, lambda: _analyze_tensors(model, ctx))


def _analyze_tensors(model: ModelEntry, ctx: RuleContext) -> list[_GraphFinding]:
    if not _members_ok(model, ctx):
        return []
    cfg = model.config
    name = config_name(model)
    batching = cfg.max_batch_size > 0
    out: list[_GraphFinding] = []
    unknown = [n for n in _member_names(model) if not member_io_final(_lookup(ctx, n), ctx)]
    if unknown:
        out.append(
            _GraphFinding(
                "mapping",
                Finding(
                    f"ensemble '{name}': the inputs and outputs of {', '.join(unknown)} come from the model file "
                    "(auto-complete), so the tensor checks need the model file",
                    severity=Severity.INFO,
                    hint="declare the member's inputs and outputs in its config.pbtxt to have them checked offline",
                ),
            )
        )
    tensors: dict[str, _TensorNode] = {}
    for io in cfg.input:
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        tensors[io.name] = _node(name, batching, io.data_type, dims)
    sink = _TensorNode(name)
    for io in cfg.output:
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        node = tensors.setdefault(io.name, _node(name, batching, io.data_type, dims))
        sink.prev.append(node)
        node.next.append(sink)

    for step in _steps(model):
        member = _lookup(ctx, step.model_name)
        mcfg = member.config
        mname = step.model_name
        if mcfg is None:
            if mname in unknown:
                return out
            from tritonclient.grpc import model_config_pb2 as pb

            mcfg = pb.ModelConfig()  # auto-complete adds no tensors and no batching: config as empty as written
        if mcfg.max_batch_size != 0 and mcfg.max_batch_size < cfg.max_batch_size:
            out.append(
                _GraphFinding(
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
            if member.config is None
            else None
        )
        out.extend(_GraphFinding(stage, Finding(text, hint=hint)) for stage, text in problems)
        if problems:
            return out
    problem = _decoupled_problem(name, cfg, tensors)
    if problem:
        out.append(_GraphFinding("decoupled", Finding(problem)))
    return out


def _map_step(
    ensemble: str, step: object, mcfg: object, tensors: dict[str, _TensorNode]
) -> list[tuple[str, str]]:
    """Core's ValidateTensorMapping for one step; links the step's tensors into the graph."""
    mname = step.model_name
    batching = mcfg.max_batch_size > 0
    # Plain copies: protobuf maps and repeated fields are slow to walk, and each is walked several times.
    input_map, output_map = dict(step.input_map), dict(step.output_map)
    member_inputs, member_outputs = list(mcfg.input), list(mcfg.output)
    problems: list[tuple[str, str]] = []
    inputs = {io.name for io in member_inputs}
    for key, tensor in input_map.items():
        if key not in inputs:
            problems.append(
                (
                    "mapping",
                    f"in ensemble {ensemble}, ensemble tensor {tensor} is mapping to non-existing input {key} in model {mname}",
                )
            )
    if problems:
        return problems
    for io in member_inputs:
        tensor = input_map.get(io.name)
        if tensor is None:
            if not io.optional:
                problems.append(
                    (
                        "mapping",
                        f"in ensemble {ensemble}, input {io.name} in model {mname} is not mapped to any ensemble tensors",
                    )
                )
            continue
        new = _node(mname, batching, io.data_type, io.dims)
        if tensor in tensors:
            text = _consistency(tensors[tensor], new, f"in ensemble {ensemble}, ensemble tensor {tensor}: ")
            if text:
                problems.append(("consistency", text))
        else:
            tensors[tensor] = new
    if problems:
        return problems
    outputs = [io.name for io in member_outputs]
    for key, tensor in output_map.items():
        if key not in outputs:
            problems.append(
                (
                    "mapping",
                    f"in ensemble {ensemble}, ensemble tensor {tensor} is mapped from non-existing output {key} in model {mname}",
                )
            )
    if problems:
        return problems
    sibling = _TensorNode(mname)
    for key, tensor in output_map.items():
        matches = [io for io in member_outputs if io.name == key]
        for io in matches:
            new = _node(mname, batching, io.data_type, io.dims)
            if tensor in tensors:
                text = _consistency(
                    tensors[tensor], new, f"in ensemble {ensemble}, ensemble tensor {tensor}: "
                )
                if text:
                    problems.append(("consistency", text))
            else:
                tensors[tensor] = new
            tensors[tensor].sibling = sibling
        if len(matches) > 1:
            problems.append(
                (
                    "mapping",
                    f"in ensemble {ensemble}, multiple outputs in model {mname} are mapped to the same ensemble tensor {tensor}",
                )
            )
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


def _decoupled_problem(ensemble: str, cfg: object, tensors: dict[str, _TensorNode]) -> str | None:
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


def _stage(model: ModelEntry, ctx: RuleContext, stage: str) -> Iterator[Finding]:
    for item in analyze_tensors(model, ctx):
        if item.stage == stage:
            yield item.finding


@rule("RB508", "ensemble-max-batch-size", ensemble_only=True)
def check_max_batch_size(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """An ensemble batches no more than any batching member allows.

    Triton: "ensemble E allows maximum batch size N, but it contains model M which only allows maximum
    batch size to be K". Non-batching members (`max_batch_size: 0`) are allowed in a batching ensemble
    when their shapes include the batch dimension.

    Fails: ensemble `max_batch_size: 8`, member `max_batch_size: 4`. Passes: ensemble `max_batch_size: 4`.
    """
    yield from _stage(model, ctx, "batch")


@rule("RB509", "ensemble-tensor-mapping", ensemble_only=True)
def check_tensor_mapping(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Each step's `input_map` keys are inputs of the member, its `output_map` keys outputs of the member,
    and every required member input is fed.

    Triton: "in ensemble E, ensemble tensor T is mapping to non-existing input X in model M", "... is
    mapped from non-existing output Y in model M", "in ensemble E, input X in model M is not mapped to
    any ensemble tensors" (inputs marked `optional: true` may stay unmapped). When a member's inputs
    and outputs are filled in from its model file (auto-complete: ONNX Runtime, TensorRT, a Python
    model.py with `auto_complete_config`), the check needs the model file. A member without
    config.pbtxt whose backend fills in nothing (a model.py without `auto_complete_config`) has no
    inputs or outputs at all, so every mapping to it fails.

    Fails: `input_map { key: "INPUT" value: "data" }` for a member whose input is `INPUT0`.
    Passes: `key: "INPUT0"`.
    """
    yield from _stage(model, ctx, "mapping")


@rule("RB510", "ensemble-tensor-consistency", ensemble_only=True)
def check_tensor_consistency(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A tensor passed between steps has one data type and one shape everywhere it appears.

    Triton: "in ensemble E, ensemble tensor T: inconsistent data type: TYPE_A is inferred from model M1
    while TYPE_B is inferred from model M2", "... inconsistent shape: [..] is inferred from model M1
    while [..] is inferred from model M2". Shapes match when equal with -1 as a wildcard, also after
    adding the batch dimension: a batching member's `[16]` matches a non-batching member's `[-1,16]`.

    Fails: a member writes TYPE_FP32 into a tensor another member reads as TYPE_INT32. Passes: both FP32.
    """
    yield from _stage(model, ctx, "consistency")


@rule("RB511", "ensemble-decoupled-branches", ensemble_only=True)
def check_decoupled_branches(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A step may not combine tensors that descend from different decoupled members.

    A decoupled member sends any number of responses per request, so Triton cannot pair tensors from two
    such branches: "in ensemble E, step of model 'M' receives inputs originated from different decoupled
    models" (M is the ensemble itself when two branches meet only at its outputs).

    Fails: two decoupled steps whose outputs feed one later step. Passes: one decoupled branch.
    """
    yield from _stage(model, ctx, "decoupled")


RULES: tuple[Rule, ...] = (
    check_scheduling_platform,
    check_ensemble_config,
    check_data_flow,
    check_members_exist,
    check_cycles,
    check_member_versions,
    check_member_refused,
    check_max_batch_size,
    check_tensor_mapping,
    check_tensor_consistency,
    check_decoupled_branches,
)
