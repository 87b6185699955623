"""How the model step uses the machine's cores: instances, ONNX Runtime threads, no spin-waiting.

Measured on a 2-core machine (issue 15): one instance using every core with spin-waiting served 0.6x what
two instances of one thread each served at concurrency 4, with more CPU per image. Spinning threads burn
the cores the other steps (preprocessing, postprocessing, the server) need, so it is always off here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from repo_builder.errors import UserError

# More instances than this rarely pays on CPU: each one holds its own session (weights and arenas).
MAX_DEFAULT_INSTANCES = 2
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def _cgroup_limit(path: Path = CGROUP_CPU_MAX) -> int | None:
    """cgroup v2 CPU quota as whole cores (a container limited to 1.5 CPUs gets 1), None when unlimited."""
    try:
        quota, period = path.read_text(encoding="ascii").split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, int(quota) // int(period))
    except (ValueError, ZeroDivisionError):
        return None


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity, further capped by a cgroup quota (containers)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    limit = _cgroup_limit()
    return max(1, min(cores, limit) if limit else cores)


@dataclass(frozen=True)
class ModelTuning:
    """The model step's thread layout. ``intra_op_threads`` 0 = decided at load: cores seen // instances."""

    instance_count: int
    intra_op_threads: int
    cores: int  # what the build machine offered, for the summary
    inter_op_threads: int = 1  # graphs run sequentially: inter-op threads would only spin

    def summary(self) -> str:
        threads = "cores // instances at load" if self.intra_op_threads == 0 else str(self.intra_op_threads)
        return (
            f"model step: {self.instance_count} instance(s) x {threads} intra-op thread(s), spin-waiting off "
            f"({self.cores} core(s) here; re-tune with --instances N --intra-op-threads N)"
        )


def tune_model_step(instances: int | None, intra_op_threads: int | None, cores: int | None = None) -> ModelTuning:
    """Defaults from the cores: min(2, cores) instances, cores // instances threads each (at least 1)."""
    cores = available_cores() if cores is None else cores
    if instances is not None and instances < 1:
        raise UserError(f"--instances must be >= 1, got {instances}")
    if intra_op_threads is not None and intra_op_threads < 0:
        raise UserError(f"--intra-op-threads must be >= 0 (0: decide at load from the cores), got {intra_op_threads}")
    count = instances if instances is not None else max(1, min(MAX_DEFAULT_INSTANCES, cores))
    threads = intra_op_threads if intra_op_threads is not None else max(1, cores // count)
    return ModelTuning(instance_count=count, intra_op_threads=threads, cores=cores)


def step_instances(requested: int | None, cores: int) -> tuple[int, int]:
    """(pre/post steps, image decoding step) instances: ``--step-instances`` for both, else 1 and, for decoding
    (CPU-bound, one image per thread of its pool), as many as the model step's default on these cores."""
    if requested is not None:
        if requested < 1:
            raise UserError(f"--step-instances must be >= 1, got {requested}")
        return requested, requested
    return 1, max(1, min(MAX_DEFAULT_INSTANCES, cores))


def python_model_parameters(intra_op_threads: int) -> dict[str, str]:
    """config.pbtxt ``parameters`` the generated model.py reads at initialize() (strings, as Triton stores them)."""
    return {
        "intra_op_thread_count": str(intra_op_threads),
        "inter_op_thread_count": "1",
        "allow_spinning": "0",
    }


def onnxruntime_backend_parameters(intra_op_threads: int) -> dict[str, str]:
    """Triton's ONNX Runtime backend keys (its README, "Model Config Options"). It has no spinning key;
    0 threads there means ONNX Runtime's own default (all cores)."""
    return {
        "intra_op_thread_count": str(intra_op_threads),
        "inter_op_thread_count": "1",
        "execution_mode": "0",  # sequential: the inter-op pool stays idle
    }
