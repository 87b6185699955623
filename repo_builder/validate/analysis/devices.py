"""Instance-group kinds as core normalizes them (``model_config_utils.cc``, ``SetDefaultInstanceCount``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelInstanceGroup

KIND_AUTO, KIND_GPU, KIND_CPU, KIND_MODEL = 0, 1, 2, 3  # ModelInstanceGroup.Kind values


def resolved_kind(group: ModelInstanceGroup, gpu_present: bool) -> int:
    """KIND_AUTO becomes KIND_GPU when GPUs are present (and every listed GPU exists), else KIND_CPU."""
    if group.kind != KIND_AUTO:
        return group.kind
    if not gpu_present or any(g < 0 for g in group.gpus):
        return KIND_CPU
    return KIND_GPU
