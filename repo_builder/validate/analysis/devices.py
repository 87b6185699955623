"""Instance-group kinds as core normalizes them (``model_config_utils.cc``, ``SetDefaultInstanceCount``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelInstanceGroup

KIND_AUTO, KIND_GPU, KIND_CPU, KIND_MODEL = 0, 1, 2, 3  # ModelInstanceGroup.Kind values


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
