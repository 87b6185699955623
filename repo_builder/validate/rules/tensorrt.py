"""Rules for TensorRT models (RB7xx): the config against the plan it loads.

The plan's facts come from ``validate.analysis.tensorrt_plans``: the engine itself on a machine with a GPU
and TensorRT (only the plan Triton would load on that GPU), else ``plan.json``, else the plan's header.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from repo_builder.compile_recipe import RECIPE_FILE, read_recipe
from repo_builder.errors import UserError
from repo_builder.plan_format import (
    PER_CAPABILITY_PLAN,
    SIDECAR_FILE,
    EngineTensor,
    PlanInfo,
    capability_from_sm,
    engine_max_batch,
    is_compute_capability,
)
from repo_builder.tensorrt_releases import expected_tensorrt, releases_for_tensorrt, same_tensorrt
from repo_builder.validate.analysis.tensorrt_plans import (
    PlanFacts,
    config_dims,
    is_tensorrt,
    loadable_versions,
    plan_facts,
    plan_names,
    used_profiles,
)
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInput, ModelOutput

_DATA_TYPE_NAMES: dict[int, str] = {}


def _type_name(value: int) -> str:
    if not _DATA_TYPE_NAMES:
        from tritonclient.grpc import model_config_pb2  # deferred package: only the protobuf classes

        _DATA_TYPE_NAMES.update({v: k for k, v in model_config_pb2.DataType.items()})
    return _DATA_TYPE_NAMES.get(value, str(value))


def _rel(facts: PlanFacts) -> str:
    return f"{facts.version.name}/{facts.filename}"


def _described(model: ModelEntry, ctx: RuleContext) -> Iterator[tuple[PlanFacts, PlanInfo]]:
    for facts in plan_facts(model):
        if facts.info is not None:
            yield facts, facts.info


@rule("RB701", "tensorrt-plan-pending")
def plan_pending(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A TensorRT model version has a compile recipe (``compile.json``) but no plan yet.

    ``repo-builder build --runtime tensorrt --defer-compile`` writes the ONNX and a recipe instead of a
    plan on machines without a GPU; ``repo-builder compile-pending REPO`` builds the plans later on a GPU
    machine. Until then Triton has no plan to load ("unable to find 'model.plan'"). An error, or a warning
    with ``--allow-pending`` (the CPU half of a split CI).

    Fails: ``1/compile.json`` and ``1/model.source.onnx`` with no ``1/model.plan``.
    Passes: ``1/model.plan`` (with or without the recipe beside it).
    """
    if not is_tensorrt(model):
        return
    severity = Severity.WARNING if ctx.options.allow_pending else None
    for v in loadable_versions(model):
        if not v.has(RECIPE_FILE):
            continue
        try:
            recipe = read_recipe(v.path / RECIPE_FILE)
        except UserError as exc:
            yield Finding(str(exc), path=v.path / RECIPE_FILE, version=v.number)
            continue
        if recipe.settings.per_capability:
            built = [f.name for f in v.files if PER_CAPABILITY_PLAN.match(f.name)]
        else:
            built = [n for n in plan_names(model) if v.has(n)]
        if not built:
            yield Finding(
                f"version {v.name}: the TensorRT plan is pending (compile recipe, no plan yet); Triton has nothing to load",
                path=v.path / RECIPE_FILE,
                version=v.number,
                severity=severity,
                hint="run 'repo-builder compile-pending REPO' on a GPU machine",
            )


@rule("RB702", "tensorrt-max-batch-within-profile")
def max_batch_within_profile(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """``max_batch_size`` must not exceed the largest batch the engine's optimization profiles allow.

    Triton takes the engine's max batch as the largest, over the profiles the instance groups use
    (profile 0 when none is named), of the smallest maximum of axis 0 over the inputs, and refuses a
    bigger ``max_batch_size``: "configuration specified max-batch N but TensorRT engine only supports
    max-batch M".

    Fails: ``max_batch_size: 16`` with a plan built for batch 1..8.
    Passes: ``max_batch_size: 8`` (or less) with the same plan.
    """
    if not is_tensorrt(model) or model.config is None or model.config.max_batch_size <= 0:
        return
    config = model.config
    for facts, info in _described(model, ctx):
        if not info.profiles:
            continue
        tensors = [(io, info.tensor(io.name)) for io in config.input]
        if not all(len(config_dims(io)) + 1 == len(t.shape) for io, t in tensors if t is not None):
            continue  # the engine has no batch axis where the config expects one: RB703 says so
        limit = engine_max_batch(info.profiles, used_profiles(model))
        if config.max_batch_size > limit:
            yield Finding(
                f"{_rel(facts)}: configuration specified max-batch {config.max_batch_size} "
                f"but TensorRT engine only supports max-batch {limit}",
                version=facts.version.number,
                hint=f"set max_batch_size to {limit} or rebuild the plan with --max-batch-size {config.max_batch_size}",
            )


def _dim_findings(facts: PlanFacts, kind: str, io: ModelInput | ModelOutput, tensor: EngineTensor, batch: int, used: tuple[int, ...]) -> Iterator[Finding]:
    dims = config_dims(io)
    if len(dims) + batch != len(tensor.shape):
        note = " (the batch axis is not listed in dims when max_batch_size > 0)" if batch else ""
        yield Finding(
            f"{_rel(facts)}: {kind} '{io.name}' has {len(dims)} dims {dims} in the configuration "
            f"but the engine's shape is {list(tensor.shape)}{note}",
            version=facts.version.number,
        )
        return
    for i, d in enumerate(dims):
        axis = i + batch
        engine_dim = tensor.shape[axis]
        if d == -1 or (engine_dim == -1 and kind != "input"):
            continue
        if engine_dim != -1:
            if d != engine_dim:
                yield Finding(
                    f"{_rel(facts)}: {kind} '{io.name}' dim {d} on axis {axis} but the engine fixes it at {engine_dim}",
                    version=facts.version.number,
                )
            continue
        yield from _profile_range_findings(facts, io.name, d, axis, used)


def _profile_range_findings(facts: PlanFacts, name: str, d: int, axis: int, used: tuple[int, ...]) -> Iterator[Finding]:
    assert facts.info is not None
    for index in used:
        if index >= len(facts.info.profiles) or name not in facts.info.profiles[index].names():
            continue
        r = facts.info.profiles[index][name]
        if not r.min[axis] <= d <= r.max[axis]:
            yield Finding(
                f"{_rel(facts)}: input '{name}' dim {d} on axis {axis} is outside optimization "
                f"profile {index}'s range {r.min[axis]}..{r.max[axis]}",
                version=facts.version.number,
                hint="use -1 for a dynamic axis, or rebuild the plan with a --profile covering this size",
            )


@rule("RB703", "tensorrt-dims-within-profile")
def dims_within_profile(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Each configured dim must fit the engine: same rank, fixed sizes equal, and every fixed size of a
    dynamic axis inside every used profile's min..max.

    The TensorRT backend compares the config's shapes with the engine's bindings and profiles when it
    loads; a dim outside a profile can never be served. (Rank counts the batch axis when
    ``max_batch_size`` > 0.)

    Fails: ``dims: [ 3, 512, 512 ]`` for an engine whose profile allows 224..224 on those axes.
    Passes: ``dims: [ 3, 224, 224 ]``, or ``-1`` on an axis the engine keeps dynamic.
    """
    if not is_tensorrt(model) or model.config is None:
        return
    config = model.config
    batch = 1 if config.max_batch_size > 0 else 0
    used = used_profiles(model)
    for facts, info in _described(model, ctx):
        for kind, ios in (("input", config.input), ("output", config.output)):
            for io in ios:
                tensor = info.tensor(io.name)
                if tensor is not None:
                    yield from _dim_findings(facts, kind, io, tensor, batch, used)


@rule("RB704", "tensorrt-dtype-matches-engine")
def dtype_matches_engine(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Each configured ``data_type`` must equal the engine's tensor type.

    The TensorRT backend does not convert: an ONNX exported with INT64 token ids gives an engine with
    INT64 inputs (TensorRT 10) and a config that says TYPE_INT32 is refused, and the other way round.

    Fails: ``data_type: TYPE_INT32`` for an engine input of type INT64.
    Passes: ``data_type: TYPE_INT64``.
    """
    if not is_tensorrt(model) or model.config is None:
        return
    for facts, info in _described(model, ctx):
        for kind, ios in (("input", model.config.input), ("output", model.config.output)):
            for io in ios:
                tensor = info.tensor(io.name)
                if tensor is None or io.data_type == 0:
                    continue
                try:
                    expected = tensor.triton_type
                except UserError:
                    continue
                got = _type_name(io.data_type)
                if got != expected:
                    yield Finding(
                        f"{_rel(facts)}: unexpected datatype {got} for {kind} '{io.name}', the TensorRT engine has {expected}",
                        version=facts.version.number,
                        hint=f"set data_type: {expected}",
                    )


def _bound_names(config: ModelConfig) -> tuple[set[str], set[str]]:
    """Engine tensors the backend binds besides ``input``/``output``: batch IO, sequence controls and states."""
    inputs = {name for b in config.batch_input for name in b.target_name}
    outputs = {name for b in config.batch_output for name in b.target_name}
    seq = config.sequence_batching
    inputs |= {c.name for c in seq.control_input}
    inputs |= {s.input_name for s in seq.state}
    outputs |= {s.output_name for s in seq.state}
    return inputs, outputs


@rule("RB705", "tensorrt-io-names-match-engine")
def io_names_match_engine(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Configured input and output names must be the engine's, and once the config lists inputs (or
    outputs) at all, every engine input (or output) must be among them.

    Triton refuses an unknown name ("unexpected inference input 'X', allowed inputs are: ..."). The
    TensorRT backend auto-completes inputs or outputs only when the config lists none (``FixIO``) and
    then requires a binding for every engine tensor: "expected configuration for output 'Y' for M"
    (tensorrt_backend ``src/instance_state.cc``). With ``--strict`` (no auto-complete) every engine tensor
    must be listed. Batch inputs/outputs and sequence controls and states count as configured.

    Fails: ``output [{ name: "logits" ...}]`` for an engine with outputs ``logits`` and ``hidden``.
    Passes: both outputs listed, or no ``output`` at all (the backend fills them in).
    """
    if not is_tensorrt(model) or model.config is None:
        return
    config = model.config
    extra_inputs, extra_outputs = _bound_names(config)
    for facts, info in _described(model, ctx):
        for kind, ios, tensors, extra in (
            ("input", config.input, info.inputs, extra_inputs),
            ("output", config.output, info.outputs, extra_outputs),
        ):
            allowed = [t.name for t in tensors]
            for io in ios:
                if io.name not in allowed:
                    yield Finding(
                        f"{_rel(facts)}: unexpected inference {kind} '{io.name}', allowed {kind}s are: {', '.join(allowed)}",
                        version=facts.version.number,
                    )
            if not ios and not ctx.options.strict:
                continue  # the backend fills them all in from the engine
            named = {io.name for io in ios} | extra
            for t in tensors:
                if t.name not in named:
                    yield Finding(
                        f"{_rel(facts)}: expected configuration for {kind} '{t.name}' for {model.name}",
                        version=facts.version.number,
                        hint=f"add {kind} '{t.name}' ({t.triton_type}) to the configuration",
                    )


@rule("RB706", "tensorrt-cc-model-filenames")
def cc_model_filenames(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """``cc_model_filenames`` keys are compute capabilities ("8.6"), each file exists in every version,
    and each plan was built for the capability it is listed under.

    Triton picks the plan by the GPU's "<major>.<minor>"; a key like "sm86" never matches, a missing
    file fails the load on that GPU generation, and a plan built for another capability does not
    deserialize there.

    (A version without the default plan is RB405's warning: GPUs not listed fall back to it.)

    Fails: ``cc_model_filenames { key: "9.0" value: "model_sm90.plan" }`` with no ``1/model_sm90.plan``.
    Passes: the same entry with ``1/model_sm90.plan`` whose plan.json says compute capability 9.0.
    """
    if not is_tensorrt(model) or model.config is None:
        return
    entries = sorted(model.config.cc_model_filenames.items())
    for key, _ in entries:
        if not is_compute_capability(key):
            guess = capability_from_sm(key)
            yield Finding(
                f"cc_model_filenames key '{key}' is not a compute capability like '8.6'; Triton will never select it",
                hint=f'use key "{guess}"' if guess else None,
            )
    for v in loadable_versions(model):
        for key, name in entries:
            if not v.has(name):
                yield Finding(
                    f"version {v.name}: cc_model_filenames maps '{key}' to '{name}', which is missing",
                    path=v.path,
                    version=v.number,
                    hint="build it on that GPU generation: repo-builder compile --per-capability (or compile-pending)",
                )
    for facts, info in _described(model, ctx):
        for key, name in entries:
            cc = info.compute_capability
            if name == facts.filename and cc and is_compute_capability(key) and cc != key:
                yield Finding(
                    f"{_rel(facts)}: built for compute capability {cc} but cc_model_filenames lists it under '{key}'",
                    path=facts.path,
                    version=facts.version.number,
                )


@rule("RB707", "tensorrt-version-matches-triton")
def version_matches_triton(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """With ``--triton-release`` (or ``--tensorrt-version``), each plan's TensorRT version must be the
    one that Triton release ships.

    A plan deserializes only in the TensorRT version that built it; Triton 24.08 ships TensorRT 10.3.0,
    so a plan built with 10.5 fails to load there. The plan's version comes from the engine (on a GPU
    machine), its ``plan.json``, or the plan file's own header. An unknown or malformed release is a
    usage error before any rule runs.

    Fails: plan.json ``"tensorrt_version": "10.5.0"`` with ``--triton-release 24.08``.
    Passes: ``"tensorrt_version": "10.3.0.26"`` with ``--triton-release 24.08``.
    """
    override = getattr(ctx.options, "tensorrt_version", None)  # ValidateOptions may not carry it yet
    if not is_tensorrt(model) or not (ctx.options.triton_release or override):
        return
    try:
        expected = expected_tensorrt(ctx.options.triton_release, override)
    except UserError as exc:
        yield Finding(str(exc))
        return
    assert expected is not None
    target = f"Triton {ctx.options.triton_release}" if override is None else "the serving Triton"
    for facts in plan_facts(model):
        version = facts.tensorrt_version
        if version is None or same_tensorrt(version, expected):
            continue
        fits = releases_for_tensorrt(version)
        yield Finding(
            f"{_rel(facts)}: built with TensorRT {version} but {target} ships TensorRT {expected}; Triton cannot "
            f"deserialize it (version read from the {facts.source})",
            path=facts.path,
            version=facts.version.number,
            hint=f"rebuild with TensorRT {expected}" + (f", or serve with Triton {', '.join(fits)}" if fits else ""),
        )


@rule("RB708", "tensorrt-gpu-instances")
def gpu_instances(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """TensorRT models run only on GPU instances: no ``KIND_CPU`` instance group.

    The TensorRT backend has no CPU execution; a ``KIND_CPU`` group fails the load. ``KIND_GPU`` (or
    ``KIND_AUTO``, which becomes GPU when one is present) is right.

    Fails: ``instance_group [{ kind: KIND_CPU }]``.
    Passes: ``instance_group [{ kind: KIND_GPU count: 1 }]``.
    """
    if not is_tensorrt(model) or model.config is None:
        return
    from tritonclient.grpc import model_config_pb2  # deferred package: only the protobuf classes

    cpu = model_config_pb2.ModelInstanceGroup.Kind.Value("KIND_CPU")
    for i, group in enumerate(model.config.instance_group):
        if group.kind == cpu:
            label = f"'{group.name}'" if group.name else f"#{i}"
            yield Finding(
                f"instance group {label} is KIND_CPU, but the TensorRT backend runs only on GPUs",
                hint="use kind: KIND_GPU",
            )


@rule("RB709", "tensorrt-plan-sidecar", Severity.INFO)
def plan_sidecar(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Each plan should have an entry in ``plan.json`` beside it, readable and consistent with its name.

    Without it the config cannot be checked against the engine offline (that needs the model file and a
    GPU with TensorRT): an ``info`` naming the TensorRT version the plan file's header records, when it
    records one (TensorRT 10 and later, as ``trtexec --getPlanVersionOnly`` reads it). Plans built
    elsewhere are normal, so this is never a warning. An unreadable ``plan.json``, a plan the engine
    cannot deserialize on this GPU, and a ``model_smXY.plan`` whose sidecar names another capability are
    errors.

    Fails: ``1/plan.json`` that is not JSON (an error); ``1/model.plan`` with no ``1/plan.json`` (an info).
    Passes: ``1/model.plan`` and the ``1/plan.json`` that ``repo-builder compile`` wrote.
    """
    if not is_tensorrt(model):
        return
    for facts in plan_facts(model):
        if facts.problem:
            where = facts.path if facts.source == "engine" else facts.version.path / SIDECAR_FILE
            yield Finding(facts.problem, path=where, version=facts.version.number, severity=Severity.ERROR)
        elif facts.info is None:
            said = f"its header says TensorRT {facts.header_version}" if facts.header_version else "its header names no TensorRT version"
            yield Finding(
                f"{_rel(facts)}: no plan.json entry ({said}); its IO and profiles are checked only on a GPU machine "
                "with TensorRT, or by --live",
                path=facts.path,
                version=facts.version.number,
                hint="plans built with 'repo-builder compile' carry plan.json",
            )
        elif facts.source == "plan.json":
            named = capability_from_sm(facts.filename)
            if named and facts.info.compute_capability and named != facts.info.compute_capability:
                yield Finding(
                    f"{_rel(facts)}: its name says compute capability {named} but plan.json says "
                    f"{facts.info.compute_capability}",
                    path=facts.path,
                    version=facts.version.number,
                    severity=Severity.ERROR,
                )


@rule("RB710", "tensorrt-profile-index")
def profile_index(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Instance groups may name only optimization profiles the engine has (``profile: ["0"]`` ...).

    Triton refuses: "configuration specified invalid profile P . Number of profiles supported by
    TensorRT engine: N".

    Fails: ``instance_group [{ kind: KIND_GPU profile: ["1"] }]`` for a plan with one profile.
    Passes: ``profile: ["0"]``, or no ``profile`` at all (Triton uses profile 0).
    """
    if not is_tensorrt(model) or model.config is None:
        return
    named = [p for g in model.config.instance_group for p in g.profile]
    for facts, info in _described(model, ctx) if named else ():
        count = len(info.profiles)
        for p in named if count else ():
            if not p.strip().isdigit() or int(p) >= count:
                yield Finding(
                    f"{_rel(facts)}: configuration specified invalid profile {p} . Number of profiles supported by "
                    f"TensorRT engine: {count}",
                    version=facts.version.number,
                )


def applies(model: ModelEntry, ctx: RuleContext) -> bool:
    """Whether a rule of this module can find anything: each one returns at once unless ``is_tensorrt``
    (the engine skips the rest for other models)."""
    return is_tensorrt(model)


RULES: tuple[Rule, ...] = (
    plan_pending,
    max_batch_within_profile,
    dims_within_profile,
    dtype_matches_engine,
    io_names_match_engine,
    cc_model_filenames,
    version_matches_triton,
    gpu_instances,
    plan_sidecar,
    profile_index,
)
GATED: tuple[Rule, ...] = RULES  # every rule here checks the gate's condition first
