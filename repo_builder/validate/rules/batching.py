"""Rules RB3xx: batching, schedulers and instance groups (core's ValidateModelConfig, ValidateInstanceGroup,
the sequence batcher's state set-up)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule
from repo_builder.validate.rules.config import WILDCARD, config_name, io_autocompleted, model_backend

# Triton's default TRITON_MIN_COMPUTE_CAPABILITY, printed with std::to_string in its GPU message.
MIN_COMPUTE_CAPABILITY = "6.000000"
KIND_AUTO, KIND_GPU, KIND_CPU, KIND_MODEL = 0, 1, 2, 3
DELAY = 1  # ModelQueuePolicy.TimeoutAction.DELAY
CONTROL_START, CONTROL_END, CONTROL_READY, CONTROL_CORRID = 0, 1, 2, 3
BOOLEAN_CONTROLS = (CONTROL_START, CONTROL_END, CONTROL_READY)
CORRID_TYPES = frozenset({4, 5, 8, 9, 13})  # TYPE_UINT32, TYPE_UINT64, TYPE_INT32, TYPE_INT64, TYPE_STRING


@rule("RB301", "max-batch-size")
def check_max_batch_size(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """`max_batch_size` is 0 (no batching: the first dimension is part of `dims`) or positive.

    Triton: "'max_batch_size' must be non-negative value for M".

    Fails: `max_batch_size: -2`. Passes: `max_batch_size: 8`.
    """
    cfg = model.config
    if cfg is not None and cfg.max_batch_size < 0:
        yield Finding(f"'max_batch_size' must be non-negative value for {config_name(model)}")


@rule("RB302", "dynamic-batching-sizes")
def check_dynamic_batching_sizes(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Dynamic batching's `preferred_batch_size` values are positive and at most `max_batch_size`.

    Triton: "dynamic batching preferred size must be positive for M", "dynamic batching preferred size
    must be <= max batch size for M". With `max_batch_size: 0` every preferred size fails; Triton
    checks this before any backend auto-complete, so a backend cannot rescue it. Dynamic batching with
    no queue settings on a model that does not batch does nothing (warning).

    Fails: `max_batch_size: 4` with `dynamic_batching { preferred_batch_size: [ 8 ] }`.
    Passes: `preferred_batch_size: [ 2, 4 ]`.
    """
    cfg = model.config
    if cfg is None or not cfg.HasField("dynamic_batching"):
        return
    name = config_name(model)
    for size in cfg.dynamic_batching.preferred_batch_size:
        if size <= 0:
            yield Finding(f"dynamic batching preferred size must be positive for {name}")
        elif size > cfg.max_batch_size:
            yield Finding(
                f"dynamic batching preferred size must be <= max batch size for {name}",
                hint=f"preferred size {size} > max_batch_size {cfg.max_batch_size}",
            )
    # Queue settings are a reason to keep the block on a non-batching model; and a backend's
    # auto-complete may still raise max_batch_size from the model file.
    db = cfg.dynamic_batching
    queues = db.priority_levels or db.HasField("default_queue_policy") or db.priority_queue_policy
    if (
        cfg.max_batch_size == 0
        and not db.preferred_batch_size
        and not queues
        and not io_autocompleted(model, ctx)
    ):
        yield Finding(
            f"dynamic_batching on {name} forms no batches because max_batch_size is 0",
            severity=Severity.WARNING,
            hint="set max_batch_size > 0 (and drop the batch dimension from dims) to batch requests",
        )


@rule("RB303", "dynamic-batching-queues")
def check_dynamic_batching_queues(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Priority levels and queue policies of dynamic batching are consistent.

    Triton: "default priority level must be in range [1, N] for M", "priority queue policy must have
    priority level in range [1, N] for M", and with `preserve_ordering: true`: "Only one priority level
    is allowed when 'preserve_ordering' is true for M", "Queue policy can not have DELAY as timeout
    action when 'preserve_ordering' is true for M".

    Fails: `dynamic_batching { priority_levels: 3 }` (no default level). Passes: add
    `default_priority_level: 2`.
    """
    cfg = model.config
    if cfg is None or not cfg.HasField("dynamic_batching"):
        return
    name = config_name(model)
    db = cfg.dynamic_batching
    levels = db.priority_levels
    if levels != 0:
        if db.default_priority_level == 0 or db.default_priority_level > levels:
            yield Finding(f"default priority level must be in range [1, {levels}] for {name}")
        for level in db.priority_queue_policy:
            if level == 0 or level > levels:
                yield Finding(
                    f"priority queue policy must have priority level in range [1, {levels}] for {name}"
                )
    if db.preserve_ordering:
        if levels > 1:
            yield Finding(f"Only one priority level is allowed when 'preserve_ordering' is true for {name}")
        policies = [db.default_queue_policy, *db.priority_queue_policy.values()]
        if any(p.default_timeout_microseconds != 0 and p.timeout_action == DELAY for p in policies):
            yield Finding(
                f"Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for {name}"
            )


def _kind_name(kind: int) -> str:
    from tritonclient.grpc import model_config_pb2 as pb

    return pb.ModelSequenceBatching.Control.Kind.Name(kind)


def _control_problems(cfg: object, name: str) -> Iterator[str]:
    """Core's Get{Boolean,Typed}SequenceControlProperties for every control kind."""
    controls = cfg.sequence_batching.control_input
    for kind in (*BOOLEAN_CONTROLS, CONTROL_CORRID):
        seen_tensors: set[str] = set()
        seen_kind = False
        for ci in controls:
            if not ci.name:
                yield f"sequence batching control tensor must have a name for {name}"
                return
            if ci.name in seen_tensors:
                yield f"sequence batching control tensor '{ci.name}' is specified for multiple control kinds for {name}"
                return
            seen_tensors.add(ci.name)
            for c in ci.control:
                if c.kind != kind:
                    continue
                if seen_kind:
                    yield f"sequence batching specifies multiple {_kind_name(kind)} tensors for {name}"
                    return
                seen_kind = True
                given = [
                    n
                    for n in ("int32_false_true", "fp32_false_true", "bool_false_true")
                    if len(getattr(c, n))
                ]
                if kind == CONTROL_CORRID:
                    if given:
                        yield (
                            "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or "
                            f"'bool_false_true' for {_kind_name(kind)} for {name}"
                        )
                    elif c.data_type not in CORRID_TYPES:
                        yield (
                            f"unexpected data type for control CONTROL_SEQUENCE_CORRID for {name}. Allowed data "
                            "types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING"
                        )
                    continue
                if not given:
                    yield (
                        "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or "
                        f"'bool_false_true' for {_kind_name(kind)} for {name}"
                    )
                elif len(given) > 1:
                    yield (
                        "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' "
                        f"and 'bool_false_true' for {_kind_name(kind)} for {name}"
                    )
                elif len(getattr(c, given[0])) != 2:
                    yield (
                        f"sequence batching control '{given[0]}' must have exactly 2 entries for "
                        f"{_kind_name(kind)} for {name}"
                    )


@rule("RB304", "sequence-batching-controls")
def check_sequence_controls(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Sequence batching's control tensors and strategy settings are well formed.

    Each control tensor has a name and one control kind; each of START, END, READY appears at most once
    and gives exactly one of `int32_false_true`, `fp32_false_true`, `bool_false_true` with 2 entries;
    CORRID gives none of those and a data type among UINT64, INT64, UINT32, INT32, STRING; `oldest`
    preferred batch sizes are positive and <= `max_batch_size`; `direct` minimum slot utilization lies
    in [0, 1]; the response cache cannot be used with sequence batching. Messages are Triton's, e.g.
    "sequence batching specifies multiple CONTROL_SEQUENCE_END tensors for M".

    Fails: a READY control with no `int32_false_true`. Passes: `int32_false_true: [ 0, 1 ]`.
    """
    cfg = model.config
    if cfg is None or not cfg.HasField("sequence_batching"):
        return
    name = config_name(model)
    if cfg.response_cache.enable:
        yield Finding(
            f"Response Cache does not currently support model {name} with sequence batching scheduler. "
            "Please disable the response cache."
        )
    for problem in _control_problems(cfg, name):
        yield Finding(problem)
    sb = cfg.sequence_batching
    if sb.HasField("oldest"):
        for size in sb.oldest.preferred_batch_size:
            if size <= 0:
                yield Finding(f"sequence batching preferred batch size must be positive for {name}")
            elif size > cfg.max_batch_size:
                yield Finding(f"sequence batching preferred batch size must be <= max batch size for {name}")
    if sb.HasField("direct") and not 0.0 <= sb.direct.minimum_slot_utilization <= 1.0:
        yield Finding(f"sequence batching minimum slot utilization must be in range (0.0, 1.0] for {name}")


@rule("RB305", "sequence-batching-state")
def check_sequence_state(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Implicit sequence state (`sequence_batching.state`) and its `initial_state` are consistent.

    Triton's sequence batcher refuses: more than one `initial_state` ("must contain exactly one or zero
    element"), an initial state whose data type differs from the state's, with no `name`, with a
    different number of dims, with a -1 dim or a dim the state fixes differently, a state input named
    twice, `use_growable_memory` without `use_same_buffer_for_input_output` or on non-GPU instances.
    A `data_file` must exist in the model's `initial_state/` folder.

    Fails: `initial_state { data_type: TYPE_INT32 dims: [ -1 ] zero_data: true name: "s" }`.
    Passes: `dims: [ 1 ]`.
    """
    cfg = model.config
    if cfg is None or not cfg.HasField("sequence_batching"):
        return
    seen: set[str] = set()
    folder = next((v for v in model.versions if v.name == "initial_state"), None)
    gpu_only = bool(cfg.instance_group) and all(g.kind == KIND_GPU for g in cfg.instance_group)
    for state in cfg.sequence_batching.state:
        sname = state.input_name
        if state.use_growable_memory:
            if not state.use_same_buffer_for_input_output:
                yield Finding(
                    "In order to 'use_growable_memory', you must also enable 'use_single_buffer' for state input "
                    f"name '{sname}'."
                )
            elif not gpu_only:
                yield Finding(
                    "'use_growable_memory' can only work with KIND_GPU model instances right now. Please either "
                    f"change the instance type to KIND_GPU or set 'use_growable_memory' to false for state input '{sname}'."
                )
        if len(state.initial_state) > 1:
            yield Finding(
                f"initial_state field for state input '{sname}' must contain exactly one or zero element. "
                f"Found '{len(state.initial_state)}' elements."
            )
            continue
        if not state.initial_state:
            continue
        init = state.initial_state[0]
        if init.data_type != state.data_type:
            yield Finding(
                f"The data type used for 'initial_state' field of state '{sname}' does not match the state data type."
            )
            continue
        if not init.name:
            yield Finding(f"Field 'name' must be set when using initial_state for state input '{sname}'.")
            continue
        if sname in seen:
            yield Finding(f"State input name '{sname}' specified more than once.")
            continue
        seen.add(sname)
        if len(init.dims) != len(state.dims):
            yield Finding(
                "Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state "
                f"input '{sname}'. {len(init.dims)} != {len(state.dims)}"
            )
            continue
        for got, want in zip(init.dims, state.dims, strict=True):
            if got == WILDCARD:
                yield Finding(
                    f"'initial_state' field for state input name '{sname}' contains variable dimensions."
                )
                break
            if want != WILDCARD and got != want:
                yield Finding(
                    f"'initial_state' dim for input name '{sname}' doesn't match 'state' dim description. {got} != {want}"
                )
                break
        which = init.WhichOneof("state_data")
        if which is None:
            yield Finding(f"initial_state setting expects state'{sname}' to have state_data set")
        elif which == "data_file" and (folder is None or folder.entry(init.data_file) is None):
            yield Finding(
                f"initial state file '{init.data_file}' for state '{sname}' does not exist in {model.name}/initial_state/",
                path=model.path / "initial_state" / init.data_file,
            )


def _group_name(cfg: object, index: int, name: str) -> str:
    group = cfg.instance_group[index]
    return group.name or f"{name}_{index}"


def resolved_kind(group: object, gpu_present: bool) -> int:
    """KIND_AUTO becomes KIND_GPU when GPUs are present (and every listed GPU exists), else KIND_CPU."""
    if group.kind != KIND_AUTO:
        return group.kind
    if not gpu_present or any(g < 0 for g in group.gpus):
        return KIND_CPU
    return KIND_GPU


@rule("RB306", "instance-group-devices")
def check_instance_group_devices(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Instance groups ask only for devices that exist and fit their kind.

    Triton normalizes each group (a missing name becomes `<model>_<index>`; KIND_AUTO becomes KIND_GPU
    when GPUs are present, else KIND_CPU) and then refuses: KIND_CPU or KIND_MODEL with `gpus`
    ("... has kind KIND_CPU but specifies one or more GPUs"), KIND_GPU with no GPU on the machine
    ("... has kind KIND_GPU but no GPUs are available"), a GPU id that does not exist ("... specifies
    invalid or unsupported gpu id N. GPUs with at least the minimum required CUDA compute
    compatibility of ... are: ..."). Whether a GPU is present comes from `--gpu`/the machine; negative
    ids never exist. Ensembles have no instance groups (RB5xx).

    Fails without a GPU: `instance_group [ { kind: KIND_GPU } ]`. Passes: `kind: KIND_CPU`.
    """
    cfg = model.config
    if cfg is None or cfg.platform == "ensemble" or cfg.HasField("ensemble_scheduling"):
        return
    name = config_name(model)
    gpu_present = ctx.options.gpu_present
    for index, group in enumerate(cfg.instance_group):
        gname = _group_name(cfg, index, name)
        kind = resolved_kind(group, gpu_present)
        prefix = f"instance group {gname} of model {name}"
        if kind in (KIND_CPU, KIND_MODEL) and group.gpus:
            label = "KIND_CPU" if kind == KIND_CPU else "KIND_MODEL"
            hint = (
                "KIND_AUTO falls back to KIND_CPU when no GPU is present" if group.kind == KIND_AUTO else None
            )
            yield Finding(f"{prefix} has kind {label} but specifies one or more GPUs", hint=hint)
        elif kind == KIND_GPU:
            if not group.gpus and not gpu_present:
                # TensorRT plans run on GPUs only, so KIND_CPU is no way out for them (see RB708).
                tensorrt = cfg.platform == "tensorrt_plan" or cfg.backend == "tensorrt"
                yield Finding(
                    f"{prefix} has kind KIND_GPU but no GPUs are available",
                    hint="validate with --gpu when the target machine has a GPU"
                    if tensorrt
                    else "use kind: KIND_CPU (or KIND_AUTO) for machines without a GPU, or validate with --gpu",
                )
            for gid in group.gpus:
                if gid < 0 or not gpu_present:
                    # Triton lists the usable GPU ids after "are: "; offline we only know none exist here.
                    yield Finding(
                        f"{prefix} specifies invalid or unsupported gpu id {gid}. GPUs with at least the minimum "
                        f"required CUDA compute compatibility of {MIN_COMPUTE_CAPABILITY} are: ",
                        hint="no GPU is present (validate with --gpu for a GPU machine)"
                        if not gpu_present
                        else "GPU ids count from 0",
                    )


@rule("RB307", "instance-group-profile")
def check_instance_group_profile(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """`instance_group.profile` selects TensorRT optimization profiles: TensorRT models only, and each
    entry is a non-negative integer.

    Triton: "instance group G of model M and platform P specifies profile field which is only supported
    for TensorRT models" (sic, no space before "specifies"), "... specifies invalid profile X. The field
    should contain the string representation of a non-negative integer."

    Fails: `profile: [ "0" ]` on an ONNX model. Passes: the same on a `tensorrt_plan` model.
    """
    cfg = model.config
    if cfg is None or cfg.HasField("ensemble_scheduling"):
        return
    name = config_name(model)
    tensorrt = model_backend(model) == "tensorrt"
    platform = cfg.platform or ("tensorrt_plan" if tensorrt else "")
    for index, group in enumerate(cfg.instance_group):
        if not group.profile:
            continue
        gname = _group_name(cfg, index, name)
        if not tensorrt:
            yield Finding(
                f"instance group {gname} of model {name} and platform {platform}specifies profile field which is "
                "only supported for TensorRT models"
            )
            continue
        for profile in group.profile:
            if not (profile.isascii() and profile.isdigit()):
                yield Finding(
                    f"instance group {gname} of model {name} and platform {platform} specifies invalid profile "
                    f"{profile}. The field should contain the string representation of a non-negative integer."
                )


@rule("RB308", "instance-group-count", Severity.WARNING)
def check_instance_group_count(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A negative instance group `count` is silently replaced by the backend's default.

    Triton does not refuse a count below 1: it uses the default (1, or 2 CPU instances for ONNX Runtime
    and TensorFlow), which for an explicit negative count is rarely what was meant. Secondary devices
    (`secondary_devices`) are only read by the TensorRT backend (DLA cores), so elsewhere they are ignored.

    Fails: `count: -1`. Passes: `count: 1`.
    """
    cfg = model.config
    if cfg is None or cfg.HasField("ensemble_scheduling"):
        return
    name = config_name(model)
    tensorrt = model_backend(model) == "tensorrt"
    for index, group in enumerate(cfg.instance_group):
        gname = _group_name(cfg, index, name)
        if group.count < 0:  # proto3: 0 is "unset", which Triton fills in as documented
            yield Finding(
                f"instance group {gname} of model {name} has count {group.count}; Triton uses its default instead"
            )
        if group.secondary_devices and not tensorrt:
            yield Finding(
                f"instance group {gname} of model {name} lists secondary_devices, which only TensorRT models use"
            )


@rule("RB309", "response-cache-decoupled")
def check_response_cache(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """The response cache cannot serve decoupled models.

    Triton: "Response Cache does not currently support model M with 'decoupled' transaction policy.
    Please disable the response cache." (Sequence batching has its own message, RB304.)

    Fails: `model_transaction_policy { decoupled: true } response_cache { enable: true }`.
    Passes: drop `response_cache`.
    """
    cfg = model.config
    if cfg is not None and cfg.model_transaction_policy.decoupled and cfg.response_cache.enable:
        yield Finding(
            f"Response Cache does not currently support model {config_name(model)} with 'decoupled' transaction "
            "policy. Please disable the response cache."
        )


RULES: tuple[Rule, ...] = (
    check_max_batch_size,
    check_dynamic_batching_sizes,
    check_dynamic_batching_queues,
    check_sequence_controls,
    check_sequence_state,
    check_instance_group_devices,
    check_instance_group_profile,
    check_instance_group_count,
    check_response_cache,
)
