"""Rules RB3xx (continued): instance groups (core's ValidateInstanceGroup) for the deploy target.

Whether the target has GPUs is ``ValidateOptions.gpu_present`` (default: a GPU server, ``--no-gpu``
for a CPU fleet), never the machine validate happens to run on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from repo_builder.validate.analysis.backends import Device, backend_info
from repo_builder.validate.analysis.devices import (
    KIND_AUTO,
    KIND_CPU,
    KIND_DEVICE,
    KIND_GPU,
    KIND_MODEL,
    devices_fit,
    gpu_exists,
    group_summary,
    resolved_kind,
)
from repo_builder.validate.analysis.positions import placed
from repo_builder.validate.analysis.resolve import config_name, judged, model_backend, resolve_backend
from repo_builder.validate.records import (
    Finding,
    ModelEntry,
    Rule,
    RuleContext,
    Severity,
    ValidateOptions,
    rule,
)

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInstanceGroup

# Triton's default TRITON_MIN_COMPUTE_CAPABILITY, printed with std::to_string in its GPU message.
MIN_COMPUTE_CAPABILITY = "6.000000"
# How a backend names itself when it refuses an instance kind (openvino_backend src/openvino.cc,
# tensorrt_backend src/instance_state.cc).
_REFUSAL = {"openvino": "Triton openVINO backend", "tensorrt": "TensorRT backend"}
_KIND_LABEL = {KIND_CPU: "KIND_CPU", KIND_GPU: "KIND_GPU", KIND_MODEL: "KIND_MODEL"}
_DEVICE_LABEL = {Device.CPU: "CPU", Device.GPU: "GPU", Device.MODEL: "MODEL"}


def _group_name(cfg: ModelConfig, index: int, name: str) -> str:
    group = cfg.instance_group[index]
    return group.name or f"{name}_{index}"


@rule("RB306", "instance-group-devices", field="instance_group", quiet="devices_fit")
def check_instance_group_devices(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Instance groups ask only for devices that exist on the deploy target and fit their kind.

    Triton normalizes each group (a missing name becomes `<model>_<index>`; KIND_AUTO becomes KIND_GPU
    when GPUs are present, else KIND_CPU; no `instance_group` at all is one KIND_AUTO group) and then
    refuses: KIND_CPU or KIND_MODEL with `gpus` ("... has kind KIND_CPU but specifies one or more
    GPUs"), KIND_GPU with no GPU on the machine ("... has kind KIND_GPU but no GPUs are available"), a
    GPU id that does not exist ("... specifies invalid or unsupported gpu id N. GPUs with at least the
    minimum required CUDA compute compatibility of ... are: ..."). A backend that runs only on GPUs
    (TensorRT: "TensorRT backend supports only GPU device") refuses the KIND_CPU that KIND_AUTO becomes
    on a CPU-only target. The target has GPUs unless validate runs with `--no-gpu`; negative ids never
    exist. `--gpus N` gives the target's GPU count: ids 0..N-1 exist, `gpus: [42]` is refused as Triton
    refuses it there (and a KIND_AUTO group listing it becomes KIND_CPU); without it, an id above 0 is
    unknown (an info), never passed as checked. A backend that runs only on CPUs (OpenVINO: "Triton openVINO backend supports only CPU
    device") refuses KIND_GPU, KIND_MODEL and a written KIND_AUTO group on a target with GPUs (with
    no `instance_group` it gets its preferred KIND_CPU), and TensorRT refuses KIND_MODEL as it does
    KIND_CPU. Ensembles have no instance groups (RB5xx).

    Fails with `--no-gpu`: `instance_group [ { kind: KIND_GPU } ]`, or a TensorRT model with no
    `instance_group` (or no `config.pbtxt` at all). Passes: `kind: KIND_CPU` for an ONNX model.
    """
    cfg = model.config
    gpu_present = ctx.options.gpu_present
    if cfg is None:
        if judged(model, ctx):  # no config.pbtxt: auto-complete gives the default KIND_AUTO group
            yield from _gpu_only_on_cpu_target(model, gpu_present)
        return
    if devices_fit(model, ctx):  # the common case (and an ensemble): nothing below can find anything
        return
    name = config_name(model)
    yield from _gpu_only_on_cpu_target(model, gpu_present)
    yield from _kind_refused_by_backend(model, gpu_present, ctx.options.gpu_count)
    for index, group in enumerate(cfg.instance_group):
        prefix = f"instance group {_group_name(cfg, index, name)} of model {name}"
        kind = resolved_kind(group, gpu_present, ctx.options.gpu_count)
        for found, child in _group_problems(prefix, group, kind, ctx.options, model):
            yield placed(found, model.config_text, "instance_group", index, child)


def _gpu_only_on_cpu_target(model: ModelEntry, gpu_present: bool) -> Iterator[Finding]:
    """KIND_AUTO (written, or the default group) becomes KIND_CPU without GPUs: a GPU-only backend refuses."""
    resolved = resolve_backend(model)
    info = backend_info(resolved.backend, resolved.platform)
    if gpu_present or info is None or not info.gpu_only:
        return
    groups = list(model.config.instance_group) if model.config is not None else []
    if groups and not any(g.kind == KIND_AUTO for g in groups):
        return  # explicit kinds: KIND_GPU is reported below, KIND_CPU by the backend's own rule (RB708)
    what = "its KIND_AUTO instance group" if groups else "its default instance group (KIND_AUTO)"
    yield Finding(
        f"{what} becomes KIND_CPU on a target without GPUs, and the {resolved.backend} backend runs only on "
        f"GPUs ({'TensorRT backend supports only GPU device' if resolved.backend == 'tensorrt' else 'GPU only'})",
        hint="deploy this model to GPU servers (validate without --no-gpu), or use a backend that runs on CPUs",
    )


def _kind_refused_by_backend(model: ModelEntry, gpu_present: bool, gpu_count: int | None) -> Iterator[Finding]:
    """An instance kind the backend refuses once core has resolved KIND_AUTO (backends.py ``devices``).

    OpenVINO runs only KIND_CPU (without ``instance_group`` it gets its preferred KIND_CPU, but a
    written group without a kind is KIND_AUTO, KIND_GPU on a target with GPUs); TensorRT only KIND_GPU.
    """
    resolved = resolve_backend(model)
    info = backend_info(resolved.backend, resolved.platform)
    if info is None or model.config is None:
        return
    name = config_name(model)
    for index, group in enumerate(model.config.instance_group):
        kind = resolved_kind(group, gpu_present, gpu_count)
        if kind not in KIND_DEVICE or KIND_DEVICE[kind] in info.devices:
            continue
        if kind == KIND_CPU and (group.kind == KIND_AUTO or resolved.backend == "tensorrt"):
            continue  # reported by _gpu_only_on_cpu_target, and by RB708 for an explicit TensorRT KIND_CPU
        became = " (KIND_AUTO becomes KIND_GPU on a target with GPUs)" if group.kind == KIND_AUTO else ""
        only = ", ".join(_DEVICE_LABEL[d] for d in sorted(info.devices))
        found = Finding(
            f"instance group {_group_name(model.config, index, name)} of model {name} is {_KIND_LABEL[kind]}{became}: "
            f"unable to load model '{name}', {_REFUSAL.get(resolved.backend, resolved.backend + ' backend')} "
            f"supports only {only} device",
            hint=f"use kind: {' or '.join(_KIND_LABEL[k] for k, d in KIND_DEVICE.items() if d in info.devices)}"
            + (" (or leave instance_group out)" if info.cpu_only else ""),
        )
        yield placed(found, model.config_text, "instance_group", index, "kind")


def _group_problems(
    prefix: str, group: ModelInstanceGroup, kind: int, options: ValidateOptions, model: ModelEntry
) -> Iterator[tuple[Finding, str]]:
    """Each problem of one group, with the field of the group it is about (its line)."""
    gpu_present = options.gpu_present
    if kind in (KIND_CPU, KIND_MODEL) and group.gpus:
        label = "KIND_CPU" if kind == KIND_CPU else "KIND_MODEL"
        hint = "KIND_AUTO falls back to KIND_CPU when no GPU is present" if group.kind == KIND_AUTO else None
        yield Finding(f"{prefix} has kind {label} but specifies one or more GPUs", hint=hint), "gpus"
        return
    if kind != KIND_GPU:
        return
    if not group.gpus and not gpu_present:
        info = backend_info(model_backend(model))
        yield Finding(
            f"{prefix} has kind KIND_GPU but no GPUs are available",
            hint="the target is a CPU-only server (--no-gpu); drop --no-gpu when it has GPUs"
            if info is not None and info.gpu_only
            else "use kind: KIND_CPU (or KIND_AUTO) for CPU-only servers, or validate without --no-gpu",
        ), "kind"
    for found in _gpu_ids(prefix, group.gpus, options):
        yield found, "gpus"


def _gpu_ids(prefix: str, gpus: Iterable[int], options: ValidateOptions) -> Iterator[Finding]:
    """Each listed GPU id exists on the target (``--gpus N``: 0..N-1); unknown without the count."""
    count = options.gpu_count if options.gpu_present else 0
    for gid in gpus:
        exists = gpu_exists(gid, options.gpu_present, options.gpu_count)
        if exists is None:
            yield Finding(
                f"{prefix} asks for gpu id {gid}: whether the target has that many GPUs is unknown",
                severity=Severity.INFO,
                hint=f"pass --gpus N (the target's GPU count) to have it judged; it loads only with at least {gid + 1}",
            )
        elif not exists:
            # Triton lists the usable GPU ids after "are: ": known only with --gpus (or none: --no-gpu).
            usable = ", ".join(str(i) for i in range(min(count or 0, 64)))
            yield Finding(
                f"{prefix} specifies invalid or unsupported gpu id {gid}. GPUs with at least the minimum "
                f"required CUDA compute compatibility of {MIN_COMPUTE_CAPABILITY} are: {usable}",
                hint="the target has no GPU (--no-gpu)" if not options.gpu_present else
                f"GPU ids count from 0: the target has {count} (--gpus)" if count else "GPU ids count from 0",
            )


@rule("RB307", "instance-group-profile", field="instance_group", quiet="no_profiles")
def check_instance_group_profile(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """`instance_group.profile` selects TensorRT optimization profiles: TensorRT models only, and each
    entry is a non-negative integer.

    Triton: "instance group G of model M and platform P specifies profile field which is only supported
    for TensorRT models" (sic, no space before "specifies"), "... specifies invalid profile X. The field
    should contain the string representation of a non-negative integer."

    Fails: `profile: [ "0" ]` on an ONNX model. Passes: the same on a `tensorrt_plan` model.
    """
    cfg = model.config
    if cfg is None or not group_summary(model).profile or cfg.HasField("ensemble_scheduling"):
        return
    name = config_name(model)
    tensorrt = model_backend(model) == "tensorrt"
    platform = cfg.platform or ("tensorrt_plan" if tensorrt else "")
    for index, group in enumerate(cfg.instance_group):
        if not group.profile:
            continue
        gname = _group_name(cfg, index, name)
        if not tensorrt:
            found = Finding(
                f"instance group {gname} of model {name} and platform {platform}specifies profile field which is "
                "only supported for TensorRT models"
            )
            yield placed(found, model.config_text, "instance_group", index, "profile")
            continue
        for profile in group.profile:
            if not (profile.isascii() and profile.isdigit()):
                found = Finding(
                    f"instance group {gname} of model {name} and platform {platform} specifies invalid profile "
                    f"{profile}. The field should contain the string representation of a non-negative integer."
                )
                yield placed(found, model.config_text, "instance_group", index, "profile")


@rule("RB308", "instance-group-count", Severity.WARNING, field="instance_group", quiet="ordinary_groups")
def check_instance_group_count(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A negative instance group `count` is silently replaced by the backend's default.

    Triton does not refuse a count below 1: it uses the default (1, or 2 CPU instances for ONNX Runtime
    and TensorFlow), which for an explicit negative count is rarely what was meant. Secondary devices
    (`secondary_devices`) are only read by the TensorRT backend (DLA cores), so elsewhere they are ignored.

    Fails: `count: -1`. Passes: `count: 1`.
    """
    cfg = model.config
    if cfg is None or not group_summary(model).odd or cfg.HasField("ensemble_scheduling"):
        return
    name = config_name(model)
    tensorrt = model_backend(model) == "tensorrt"
    for index, group in enumerate(cfg.instance_group):
        gname = _group_name(cfg, index, name)
        if group.count < 0:  # proto3: 0 is "unset", which Triton fills in as documented
            found = Finding(
                f"instance group {gname} of model {name} has count {group.count}; Triton uses its default instead"
            )
            yield placed(found, model.config_text, "instance_group", index, "count")
        if group.secondary_devices and not tensorrt:
            found = Finding(
                f"instance group {gname} of model {name} lists secondary_devices, which only TensorRT models use"
            )
            yield placed(found, model.config_text, "instance_group", index, "secondary_devices")


RULES: tuple[Rule, ...] = (
    check_instance_group_devices,
    check_instance_group_profile,
    check_instance_group_count,
)
