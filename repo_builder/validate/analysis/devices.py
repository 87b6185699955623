"""Instance-group kinds as core normalizes them (``model_config_utils.cc``, ``SetDefaultInstanceCount``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from repo_builder.validate.analysis.backends import Device, backend_info
from repo_builder.validate.analysis.memo import model_fact
from repo_builder.validate.analysis.resolve import resolve_backend
from repo_builder.validate.analysis.shapes import written_anywhere
from repo_builder.validate.records import ModelEntry, RuleContext

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelInstanceGroup

KIND_AUTO, KIND_GPU, KIND_CPU, KIND_MODEL = 0, 1, 2, 3  # ModelInstanceGroup.Kind values
KIND_DEVICE = {KIND_CPU: Device.CPU, KIND_GPU: Device.GPU, KIND_MODEL: Device.MODEL}


def gpu_exists(gid: int, gpu_present: bool, gpu_count: int | None) -> bool | None:
    """Whether the target has GPU ``gid``: ids count from 0; None when the count is unknown and gid > 0."""
    if gid < 0 or not gpu_present:
        return False
    if gpu_count is not None:
        return gid < gpu_count
    return True if gid == 0 else None


def resolved_kind(group: ModelInstanceGroup, gpu_present: bool, gpu_count: int | None = None) -> int:
    """KIND_AUTO becomes KIND_GPU when GPUs are present (and every listed GPU exists), else KIND_CPU."""
    if group.kind != KIND_AUTO:
        return group.kind
    if not gpu_present or any(gpu_exists(g, gpu_present, gpu_count) is False for g in group.gpus):
        return KIND_CPU
    return KIND_GPU


class GroupSummary(NamedTuple):
    """One pass over a config's instance groups: when a flag is false, the rules that look for it have
    nothing to find (the common config is judged without each rule walking the groups again)."""

    kinds: tuple[int, ...]  # each group's written kind
    gpus: bool  # some group lists gpus
    profile: bool  # some group lists a TensorRT profile (RB307)
    odd: bool  # some group has a negative count or secondary_devices (RB308)


def group_summary(model: ModelEntry) -> GroupSummary:
    """``GroupSummary`` of the model's config (no groups without one), kept on the entry."""
    return model_fact(model, group_summary, _summarize_groups)


# What the summary looks for besides kind and count (a config text that never writes one sets none of them:
# shapes.written_anywhere).
_RARE_GROUP_FIELDS = ("gpus", "profile", "secondary_devices")


def _summarize_groups(model: ModelEntry) -> GroupSummary:
    kinds: list[int] = []
    gpus = profile = odd = False
    cfg = model.config
    if cfg is None:
        return GroupSummary((), gpus, profile, odd)
    rare = written_anywhere(model.config_text, _RARE_GROUP_FIELDS)
    for group in cfg.instance_group[:]:
        kinds.append(group.kind)
        odd = odd or group.count < 0
        if rare:
            gpus = gpus or bool(group.gpus)
            profile = profile or bool(group.profile)
            odd = odd or bool(group.secondary_devices)
    return GroupSummary(tuple(kinds), gpus, profile, odd)


def devices_fit(model: ModelEntry, ctx: RuleContext) -> bool:
    """The devices rule (RB306) has nothing to find in the model's config: an ensemble (it has no instance
    groups), or on a target with GPUs, groups that list no gpus and whose kinds the backend accepts (KIND_AUTO
    is KIND_GPU there). False without a config: its default group is judged. The rule and the engine's quiet
    flag both ask this."""
    cfg = model.config
    if cfg is None:
        return False
    if cfg.platform == "ensemble" or cfg.HasField("ensemble_scheduling"):
        return True
    if not ctx.options.gpu_present:
        return False
    groups = group_summary(model)
    return not groups.gpus and _kinds_accepted(model, groups.kinds)


def _kinds_accepted(model: ModelEntry, kinds: tuple[int, ...]) -> bool:
    resolved = resolve_backend(model)
    info = backend_info(resolved.backend, resolved.platform)
    if info is None:
        return True
    for kind in kinds:
        device = KIND_DEVICE.get(KIND_GPU if kind == KIND_AUTO else kind)
        if device is not None and device not in info.devices:
            return False
    return True
