"""Find NVIDIA GPUs and their compute capability cheaply: ``nvidia-smi``, else the CUDA driver via ctypes.

Neither path imports TensorRT or torch, so asking "is there a GPU?" costs milliseconds.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from functools import lru_cache

from repo_builder.errors import ToolError, UserError
from repo_builder.plan_format import is_compute_capability

# cuDeviceGetAttribute ids (cuda.h: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR)
_CU_CC_MAJOR = 75
_CU_CC_MINOR = 76


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    compute_capability: str  # "8.6"

    @property
    def sm(self) -> str:
        """The ``sm86`` spelling used in per-capability plan names."""
        return "sm" + self.compute_capability.replace(".", "")


@dataclass(frozen=True)
class GpuProbe:
    """What was found, and why not when nothing was: the words for a one-line error."""

    gpus: tuple[GpuInfo, ...]
    missing: tuple[str, ...] = ()
    source: str = ""  # "nvidia-smi" (physical indices) or "libcuda" (CUDA's own, after CUDA_VISIBLE_DEVICES)


def parse_nvidia_smi(text: str) -> tuple[GpuInfo, ...]:
    """Parse ``nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader``."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit() or not is_compute_capability(parts[-1]):
            continue
        gpus.append(GpuInfo(int(parts[0]), ", ".join(parts[1:-1]), parts[-1]))
    return tuple(gpus)


def _probe_nvidia_smi() -> tuple[tuple[GpuInfo, ...], str | None]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return (), "nvidia-smi is not on PATH"
    import subprocess  # stdlib, but only a GPU probe needs it: offline validate starts faster without

    try:
        done = subprocess.run(
            [exe, "--query-gpu=index,name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return (), f"nvidia-smi failed ({exc})"
    gpus = parse_nvidia_smi(done.stdout)
    if not gpus:
        why = (done.stderr or done.stdout).strip().splitlines()
        return (), f"nvidia-smi lists no GPU ({why[0] if why else f'exit {done.returncode}'})"
    return gpus, None


def _probe_libcuda() -> tuple[tuple[GpuInfo, ...], str | None]:
    import ctypes  # stdlib, but ~5 ms with ctypes.util: only a GPU probe needs it
    import ctypes.util

    name = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        cuda = ctypes.CDLL(name)
    except OSError:
        return (), "the CUDA driver library (libcuda.so.1) is not installed"
    if cuda.cuInit(0) != 0:
        return (), "the CUDA driver found no usable GPU (cuInit failed)"
    count = ctypes.c_int()
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return (), "the CUDA driver reports no GPU"
    gpus = []
    for i in range(count.value):
        device = ctypes.c_int()
        major, minor = ctypes.c_int(), ctypes.c_int()
        raw = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGet(ctypes.byref(device), i) != 0:
            continue
        cuda.cuDeviceGetName(raw, 256, device)
        cuda.cuDeviceGetAttribute(ctypes.byref(major), _CU_CC_MAJOR, device)
        cuda.cuDeviceGetAttribute(ctypes.byref(minor), _CU_CC_MINOR, device)
        gpus.append(GpuInfo(i, raw.value.decode(errors="replace"), f"{major.value}.{minor.value}"))
    return tuple(gpus), None if gpus else "the CUDA driver reports no GPU"


@lru_cache(maxsize=1)
def probe_gpus() -> GpuProbe:
    """nvidia-smi first (no CUDA context is created); the driver library when nvidia-smi is absent."""
    gpus, smi_problem = _probe_nvidia_smi()
    if gpus:
        return GpuProbe(gpus, source="nvidia-smi")
    gpus, cuda_problem = _probe_libcuda()
    if gpus:
        return GpuProbe(gpus, source="libcuda")
    return GpuProbe((), tuple(p for p in (smi_problem, cuda_problem) if p))


def detect_gpus() -> tuple[GpuInfo, ...]:
    return probe_gpus().gpus


def gpu_present() -> bool:
    return bool(probe_gpus().gpus)


def missing_gpu_reason() -> str | None:
    """None with a GPU; otherwise what is missing, in words."""
    probe = probe_gpus()
    if probe.gpus:
        return None
    return "no NVIDIA GPU found (" + "; ".join(probe.missing or ("no GPU detected",)) + ")"


def physical_index(device: int, visible: str | None = None) -> int:
    """CUDA device N -> nvidia-smi's index, through CUDA_VISIBLE_DEVICES when it lists plain indices."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    if visible:
        ids = [v.strip() for v in visible.split(",") if v.strip()]
        if ids and all(v.isdigit() for v in ids) and device < len(ids):
            return int(ids[device])
    return device


def require_gpu(device: int = 0) -> GpuInfo:
    """The GPU to build for (CUDA device ``device``), or a one-line ToolError naming what is missing (exit 3)."""
    reason = missing_gpu_reason()
    if reason:
        raise ToolError(f"{reason}: TensorRT plans must be built on the GPU they will run on: build with --runtime tensorrt --defer-compile here and run 'repo-builder compile-pending REPO' on a GPU machine")
    probe = probe_gpus()
    index = physical_index(device) if probe.source == "nvidia-smi" else device
    for gpu in probe.gpus:
        if gpu.index == index:
            return gpu
    raise UserError(f"no GPU with index {device}; found {', '.join(str(g.index) for g in probe_gpus().gpus)}")
