"""Rules for TensorRT models (RB7xx): the config against the plan it loads.

The plan's facts come from its ``plan.json`` sidecar; when TensorRT is importable and a GPU is present
(``ValidateOptions.gpu_present``), from the engine itself. Which plan Triton loads depends on the GPU
(``cc_model_filenames["<major>.<minor>"]``, else ``default_model_filename``, else ``model.plan``), so every
plan a config can name is checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, VersionDir, rule

if TYPE_CHECKING:
    from repo_builder.compile.sidecar import PlanInfo

# repo_builder.compile is imported only inside the rules, once a model is known to be TensorRT: its
# package __init__ pulls in the whole compile flow (tens of ms), which every other validate run would pay
# at start-up. The two file names are repeated here for that reason (a test keeps them equal).
DEFAULT_PLAN = "model.plan"
RECIPE_FILE = "compile.json"  # repo_builder.compile.pending.RECIPE_FILE
SIDECAR_FILE = "plan.json"  # repo_builder.compile.sidecar.SIDECAR_FILE
_DATA_TYPE_NAMES: dict[int, str] = {}


def _is_tensorrt(model: ModelEntry) -> bool:
    c = model.config
    return c is not None and (c.platform == "tensorrt_plan" or c.backend == "tensorrt")


def _versions(model: ModelEntry) -> Iterator[VersionDir]:
    for v in model.versions:
        if v.number is not None:
            yield v


def _plan_names(model: ModelEntry) -> tuple[str, ...]:
    """Every plan file the config can make Triton load, default first."""
    assert model.config is not None
    default = model.config.default_model_filename or DEFAULT_PLAN
    names = [default]
    for _, name in sorted(model.config.cc_model_filenames.items()):
        if name not in names:
            names.append(name)
    return tuple(names)


def _type_name(value: int) -> str:
    if not _DATA_TYPE_NAMES:
        from tritonclient.grpc import model_config_pb2

        _DATA_TYPE_NAMES.update({v: k for k, v in model_config_pb2.DataType.items()})
    return _DATA_TYPE_NAMES.get(value, str(value))


@dataclass(frozen=True)
class PlanFacts:
    version: VersionDir
    filename: str
    info: PlanInfo | None
    problem: str | None = None  # plan.json unreadable, or the engine would not deserialize
    source: str = "plan.json"

    @property
    def path(self) -> Path:
        return self.version.path / self.filename


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=256)
def _sidecar(path: str, stamp: tuple[int, int] | None) -> tuple[dict[str, PlanInfo] | None, str | None]:
    from repo_builder.compile.sidecar import read_sidecar

    try:
        return read_sidecar(Path(path)), None
    except UserError as exc:
        return None, str(exc)


@lru_cache(maxsize=64)
def _engine(path: str, stamp: tuple[int, int] | None) -> tuple[PlanInfo | None, str | None]:
    from repo_builder.compile.sidecar import PlanInfo
    from repo_builder.compile.tensorrt_api import read_engine

    try:
        d = read_engine(Path(path))
    except UserError as exc:
        return None, str(exc)
    return PlanInfo(
        Path(path).name, d.tensorrt_version, "", d.profiles, d.inputs, d.outputs, io_source="engine"
    ), None


def _engine_readable(ctx: RuleContext) -> bool:
    if not ctx.options.gpu_present:
        return False
    from repo_builder.compile.tensorrt_api import tensorrt_available

    return tensorrt_available()


def plan_facts(model: ModelEntry, ctx: RuleContext) -> list[PlanFacts]:
    """The plans present in each version, with what plan.json (or the engine) says about them."""
    out = []
    use_engine = _engine_readable(ctx)
    for v in _versions(model):
        sidecar_path = v.path / SIDECAR_FILE
        plans, problem = (None, None)
        if v.has(SIDECAR_FILE):
            plans, problem = _sidecar(str(sidecar_path), _stamp(sidecar_path))
        for name in _plan_names(model):
            if not v.has(name):
                continue
            info = plans.get(name) if plans else None
            if use_engine:
                engine_info, engine_problem = _engine(str(v.path / name), _stamp(v.path / name))
                if engine_info is not None:
                    from repo_builder.compile.sidecar import PlanInfo

                    cc = info.compute_capability if info else ""
                    engine_info = PlanInfo(**{**engine_info.__dict__, "compute_capability": cc})
                out.append(PlanFacts(v, name, engine_info, engine_problem, "engine"))
                continue
            out.append(PlanFacts(v, name, info, problem))
    return out


def _used_profiles(model: ModelEntry) -> tuple[int, ...]:
    assert model.config is not None
    used = {int(p) for g in model.config.instance_group for p in g.profile if p.strip().isdigit()}
    return tuple(sorted(used)) or (0,)


def _rel(facts: PlanFacts) -> str:
    return f"{facts.version.name}/{facts.filename}"


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
    if not _is_tensorrt(model):
        return
    from repo_builder.compile.pending import read_recipe

    severity = Severity.WARNING if ctx.options.allow_pending else None
    for v in _versions(model):
        if not v.has(RECIPE_FILE):
            continue
        try:
            recipe = read_recipe(v.path / RECIPE_FILE)
        except UserError as exc:
            yield Finding(str(exc), path=v.path / RECIPE_FILE, version=v.number)
            continue
        if recipe.settings.per_capability:
            built = [f.name for f in v.files if re.match(r"^model_sm\d{2,3}\.plan$", f.name)]
        else:
            built = [n for n in _plan_names(model) if v.has(n)]
        if not built:
            yield Finding(
                f"version {v.name}: the TensorRT plan is pending (compile recipe, no plan yet); Triton has nothing to load",
                path=v.path / RECIPE_FILE,
                version=v.number,
                severity=severity,
                hint="run 'repo-builder compile-pending REPO' on a GPU machine (see docs/gpu-ci.md)",
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
    if not _is_tensorrt(model) or model.config is None or model.config.max_batch_size <= 0:
        return
    from repo_builder.compile.profiles import engine_max_batch

    used = _used_profiles(model)
    for facts in plan_facts(model, ctx):
        if facts.info is None or not facts.info.profiles:
            continue
        ranks_fit = all(
            len(_config_dims(io)) + 1 == len(t.shape)
            for io in model.config.input
            if (t := facts.info.tensor(io.name)) is not None
        )
        if not ranks_fit:
            continue  # the engine has no batch axis where the config expects one: RB703 says so
        limit = engine_max_batch(facts.info.profiles, used)
        if model.config.max_batch_size > limit:
            yield Finding(
                f"{_rel(facts)}: configuration specified max-batch {model.config.max_batch_size} "
                f"but TensorRT engine only supports max-batch {limit}",
                version=facts.version.number,
                hint=f"set max_batch_size to {limit} or rebuild the plan with --max-batch-size {model.config.max_batch_size}",
            )


def _config_dims(io: Any) -> list[int]:
    return list(io.reshape.shape) if io.HasField("reshape") else list(io.dims)


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
    if not _is_tensorrt(model) or model.config is None:
        return
    config = model.config
    batch = 1 if config.max_batch_size > 0 else 0
    used = _used_profiles(model)
    for facts in plan_facts(model, ctx):
        info = facts.info
        if info is None:
            continue
        for kind, ios in (("input", config.input), ("output", config.output)):
            for io in ios:
                tensor = info.tensor(io.name)
                if tensor is None:
                    continue
                dims = _config_dims(io)
                if len(dims) + batch != len(tensor.shape):
                    yield Finding(
                        f"{_rel(facts)}: {kind} '{io.name}' has {len(dims)} dims {dims} in the configuration "
                        f"but the engine's shape is {list(tensor.shape)}"
                        + (
                            " (the batch axis is not listed in dims when max_batch_size > 0)" if batch else ""
                        ),
                        version=facts.version.number,
                    )
                    continue
                for i, d in enumerate(dims):
                    axis = i + batch
                    engine_dim = tensor.shape[axis]
                    if d == -1:
                        continue
                    if engine_dim != -1:
                        if d != engine_dim:
                            yield Finding(
                                f"{_rel(facts)}: {kind} '{io.name}' dim {d} on axis {axis} but the engine fixes it at {engine_dim}",
                                version=facts.version.number,
                            )
                        continue
                    if kind != "input":
                        continue
                    for index in used:
                        if index >= len(info.profiles):
                            continue
                        try:
                            r = info.profiles[index][io.name]
                        except KeyError:
                            continue
                        if not r.min[axis] <= d <= r.max[axis]:
                            yield Finding(
                                f"{_rel(facts)}: input '{io.name}' dim {d} on axis {axis} is outside optimization "
                                f"profile {index}'s range {r.min[axis]}..{r.max[axis]}",
                                version=facts.version.number,
                                hint="use -1 for a dynamic axis, or rebuild the plan with a --profile covering this size",
                            )


@rule("RB704", "tensorrt-dtype-matches-engine")
def dtype_matches_engine(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Each configured ``data_type`` must equal the engine's tensor type.

    The TensorRT backend does not convert: an ONNX exported with INT64 token ids gives an engine with
    INT64 inputs (TensorRT 10) and a config that says TYPE_INT32 is refused, and the other way round.

    Fails: ``data_type: TYPE_INT32`` for an engine input of type INT64.
    Passes: ``data_type: TYPE_INT64``.
    """
    if not _is_tensorrt(model) or model.config is None:
        return
    for facts in plan_facts(model, ctx):
        if facts.info is None:
            continue
        for kind, ios in (("input", model.config.input), ("output", model.config.output)):
            for io in ios:
                tensor = facts.info.tensor(io.name)
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


@rule("RB705", "tensorrt-io-names-match-engine")
def io_names_match_engine(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Configured input and output names must be the engine's, and every engine input must be configured.

    Triton's backends refuse an unknown name ("unexpected inference input 'X', allowed inputs are: ...")
    and cannot feed an engine input the config does not describe.

    Fails: ``input [{ name: "input_ids" ...}]`` for an engine whose input is ``input``.
    Passes: the names ``plan.json`` lists under ``inputs`` and ``outputs``.
    """
    if not _is_tensorrt(model) or model.config is None:
        return
    config = model.config
    for facts in plan_facts(model, ctx):
        info = facts.info
        if info is None:
            continue
        for kind, ios, tensors in (
            ("input", config.input, info.inputs),
            ("output", config.output, info.outputs),
        ):
            allowed = [t.name for t in tensors]
            for io in ios:
                if io.name not in allowed:
                    yield Finding(
                        f"{_rel(facts)}: unexpected inference {kind} '{io.name}', allowed {kind}s are: {', '.join(allowed)}",
                        version=facts.version.number,
                    )
        if config.input:
            named = {io.name for io in config.input} | {
                b.target_name[0] for b in config.batch_input if b.target_name
            }
            for t in info.inputs:
                if t.name not in named:
                    yield Finding(
                        f"{_rel(facts)}: engine input '{t.name}' is missing from the configuration",
                        version=facts.version.number,
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
    if not _is_tensorrt(model) or model.config is None:
        return
    from repo_builder.compile.gpu import capability_from_sm, is_compute_capability

    entries = sorted(model.config.cc_model_filenames.items())
    for key, _ in entries:
        if not is_compute_capability(key):
            guess = capability_from_sm(key)
            yield Finding(
                f"cc_model_filenames key '{key}' is not a compute capability like '8.6'; Triton will never select it",
                hint=f'use key "{guess}"' if guess else None,
            )
    for v in _versions(model):
        for key, name in entries:
            if not v.has(name):
                yield Finding(
                    f"version {v.name}: cc_model_filenames maps '{key}' to '{name}', which is missing",
                    path=v.path,
                    version=v.number,
                    hint="build it on that GPU generation: repo-builder compile --per-capability (or compile-pending)",
                )
    for facts in plan_facts(model, ctx):
        cc = facts.info.compute_capability if facts.info else ""
        for key, name in entries:
            if name == facts.filename and cc and is_compute_capability(key) and cc != key:
                yield Finding(
                    f"{_rel(facts)}: built for compute capability {cc} but cc_model_filenames lists it under '{key}'",
                    path=facts.path,
                    version=facts.version.number,
                )


@rule("RB707", "tensorrt-version-matches-triton")
def version_matches_triton(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """With ``--triton-release``, each plan's TensorRT version must be the one that Triton release ships.

    A plan deserializes only in the TensorRT version that built it; Triton 24.08 ships TensorRT 10.3.0,
    so a plan built with 10.5 fails to load there. A release missing from the table is a warning.

    Fails: plan.json ``"tensorrt_version": "10.5.0"`` with ``--triton-release 24.08``.
    Passes: ``"tensorrt_version": "10.3.0.26"`` with ``--triton-release 24.08``.
    """
    if not _is_tensorrt(model) or not ctx.options.triton_release:
        return
    from repo_builder.compile.releases import (
        normalize_release,
        releases_for_tensorrt,
        same_tensorrt,
        tensorrt_for_release,
    )

    try:
        release = normalize_release(ctx.options.triton_release)
    except UserError as exc:
        yield Finding(str(exc), severity=Severity.WARNING)
        return
    expected = tensorrt_for_release(release)
    facts_list = [f for f in plan_facts(model, ctx) if f.info is not None and f.source == "plan.json"]
    if expected is None:
        if facts_list:
            yield Finding(
                f"Triton release {release} is not in the TensorRT version table; the plans' TensorRT versions are not checked",
                severity=Severity.WARNING,
            )
        return
    for facts in facts_list:
        assert facts.info is not None
        if not same_tensorrt(facts.info.tensorrt_version, expected):
            fits = releases_for_tensorrt(facts.info.tensorrt_version)
            yield Finding(
                f"{_rel(facts)}: built with TensorRT {facts.info.tensorrt_version} but Triton {release} ships TensorRT "
                f"{expected}; Triton cannot deserialize it",
                path=facts.path,
                version=facts.version.number,
                hint=f"rebuild with TensorRT {expected}"
                + (f", or serve with Triton {', '.join(fits)}" if fits else ""),
            )


@rule("RB708", "tensorrt-gpu-instances")
def gpu_instances(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """TensorRT models run only on GPU instances: no ``KIND_CPU`` instance group.

    The TensorRT backend has no CPU execution; a ``KIND_CPU`` group fails the load. ``KIND_GPU`` (or
    ``KIND_AUTO``, which becomes GPU when one is present) is right.

    Fails: ``instance_group [{ kind: KIND_CPU }]``.
    Passes: ``instance_group [{ kind: KIND_GPU count: 1 }]``.
    """
    if not _is_tensorrt(model) or model.config is None:
        return
    from tritonclient.grpc import model_config_pb2

    cpu = model_config_pb2.ModelInstanceGroup.Kind.Value("KIND_CPU")
    for i, group in enumerate(model.config.instance_group):
        if group.kind == cpu:
            label = f"'{group.name}'" if group.name else f"#{i}"
            yield Finding(
                f"instance group {label} is KIND_CPU, but the TensorRT backend runs only on GPUs",
                hint="use kind: KIND_GPU",
            )


@rule("RB709", "tensorrt-plan-sidecar", Severity.WARNING)
def plan_sidecar(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Each plan should have an entry in ``plan.json`` beside it, readable and consistent with its name.

    Without it the config cannot be checked against the engine offline (that needs the model file and a
    GPU with TensorRT). An unreadable ``plan.json`` and a ``model_smXY.plan`` whose sidecar names another
    capability are errors.

    Fails: ``1/model.plan`` with no ``1/plan.json``.
    Passes: ``1/model.plan`` and the ``1/plan.json`` that ``repo-builder compile`` wrote.
    """
    if not _is_tensorrt(model):
        return
    from repo_builder.compile.gpu import capability_from_sm

    for facts in plan_facts(model, ctx):
        if facts.problem:
            yield Finding(
                facts.problem,
                path=facts.path if facts.source == "engine" else facts.version.path / SIDECAR_FILE,
                version=facts.version.number,
                severity=Severity.ERROR,
            )
        elif facts.info is None:
            yield Finding(
                f"{_rel(facts)}: no plan.json entry; its IO, profiles and TensorRT version cannot be checked "
                "offline (needs the model file: run validate on a GPU machine with TensorRT)",
                path=facts.path,
                version=facts.version.number,
                hint="build plans with 'repo-builder compile', which writes plan.json",
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
    if not _is_tensorrt(model) or model.config is None:
        return
    named = [p for g in model.config.instance_group for p in g.profile]
    if not named:
        return
    for facts in plan_facts(model, ctx):
        if facts.info is None or not facts.info.profiles:
            continue
        count = len(facts.info.profiles)
        for p in named:
            if not p.strip().isdigit() or int(p) >= count:
                yield Finding(
                    f"{_rel(facts)}: configuration specified invalid profile {p} . Number of profiles supported by "
                    f"TensorRT engine: {count}",
                    version=facts.version.number,
                )


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
