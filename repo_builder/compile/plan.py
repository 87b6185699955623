"""ONNX + signature -> TensorRT plan + ``plan.json``, on this machine's GPU, through the API or trtexec."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repo_builder import dtypes
from repo_builder.compile import gpu as gpu_mod
from repo_builder.compile.precision import plan_precision, read_onnx_facts
from repo_builder.compile.profiles import derive_profiles
from repo_builder.compile.settings import CompileSettings
from repo_builder.compile.sidecar import SIDECAR_FILE, EngineTensor, PlanInfo, write_sidecar
from repo_builder.compile.trtexec import (
    command_script,
    find_trtexec,
    format_command,
    trtexec_command,
    trtexec_version,
)
from repo_builder.errors import UserError
from repo_builder.fsutil import prepare_out_dir, staging_folder
from repo_builder.spec import PlanArtifact, Profile, Signature, TensorSpec

if TYPE_CHECKING:
    from repo_builder.compile.tensorrt_api import EngineDescription

DEFAULT_PLAN = "model.plan"
Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass(frozen=True)
class BuildEnvironment:
    gpu: gpu_mod.GpuInfo
    builder: str  # "api" | "trtexec"
    tensorrt_version: str
    trtexec: str | None = None


def plan_filename(compute_capability: str, per_capability: bool) -> str:
    """``model.plan``, or ``model_sm90.plan`` for a per-capability repository (cc_model_filenames)."""
    if not per_capability:
        return DEFAULT_PLAN
    return f"model_sm{compute_capability.replace('.', '')}.plan"


def require_build_environment(builder: str, device: int = 0) -> BuildEnvironment:
    """Everything a build needs, or one UserError line naming every missing piece."""
    from repo_builder.compile.tensorrt_api import tensorrt_available

    missing = []
    gpu_reason = gpu_mod.missing_gpu_reason()
    if gpu_reason:
        missing.append(gpu_reason)
    has_api = builder in ("api", "auto") and tensorrt_available()
    exe = find_trtexec() if builder in ("trtexec", "auto") and not has_api else None
    if builder == "api" and not has_api:
        missing.append("the TensorRT Python package 'tensorrt' is not importable (pip install 'repo-builder[tensorrt]' from NVIDIA's index)")
    elif builder == "trtexec" and exe is None:
        missing.append("trtexec is not on PATH (it ships with TensorRT's tarball and NVIDIA's containers)")
    elif builder == "auto" and not has_api and exe is None:
        missing.append("neither the TensorRT Python package 'tensorrt' nor trtexec is installed")
    if missing:
        raise UserError("cannot build a TensorRT plan here: " + "; ".join(missing))
    gpu = gpu_mod.require_gpu(device)
    if has_api and device != 0:
        raise UserError(
            f"--device {device} with TensorRT's Python API: the API builds on CUDA device 0; "
            f"run with CUDA_VISIBLE_DEVICES={gpu.index} instead, or use --builder trtexec"
        )
    if has_api:
        from repo_builder.compile.tensorrt_api import tensorrt_version

        return BuildEnvironment(gpu, "api", tensorrt_version())
    assert exe is not None
    return BuildEnvironment(gpu, "trtexec", trtexec_version(exe), exe)


def check_compile_inputs(onnx_path: Path, signature: Signature, settings: CompileSettings) -> tuple[Profile, ...]:
    """What a build needs from its inputs, checked before any work: the ONNX file, types, and the profiles."""
    if not onnx_path.is_file():
        raise UserError(f"{onnx_path}: no such ONNX file")
    check_tensorrt_types(signature)
    return derive_profiles(signature, settings)


def check_tensorrt_types(signature: Signature) -> None:
    for t in (*signature.inputs, *signature.outputs):
        if dtypes.from_numpy(t.dtype).tensorrt is None:
            raise UserError(f"tensor '{t.name}' is {t.dtype}, which TensorRT has no type for; re-export with a supported type")


def _signature_io(tensors: tuple[TensorSpec, ...]) -> tuple[EngineTensor, ...]:
    return tuple(
        EngineTensor(t.name, dtypes.from_numpy(t.dtype).tensorrt or t.dtype, tuple(-1 if isinstance(d, str) else d for d in t.shape))
        for t in tensors
    )


def compile_plan(
    onnx_path: Path,
    signature: Signature,
    out_dir: Path,
    settings: CompileSettings,
    *,
    log: Log | None = None,
    device: int = 0,
    final_dir: Path | None = None,
) -> PlanArtifact:
    """Build a plan for this machine's GPU into ``out_dir`` (staged, then renamed in) with ``plan.json``.

    Raises UserError without a GPU, without TensorRT/trtexec, or when the ONNX does not parse.
    ``final_dir``: where the files will end up when the caller moves them on (named in the trtexec script).
    """
    log = log or _stderr
    onnx_path = Path(onnx_path)
    out_dir = Path(out_dir)
    profiles = check_compile_inputs(onnx_path, signature, settings)
    env = require_build_environment(settings.builder, device)
    major = int(env.tensorrt_version.split(".")[0])
    precision = plan_precision(settings.precision, major, read_onnx_facts(onnx_path))
    dynamic = tuple(t.name for t in signature.inputs if t.dynamic_axes)
    name = plan_filename(env.gpu.compute_capability, settings.per_capability)
    prepare_out_dir(out_dir)
    with staging_folder(out_dir, ".compile-staging-") as staging:
        staged_plan = staging / name
        extra_files = []
        described: EngineDescription | None = None
        if env.builder == "api":
            from repo_builder.compile.tensorrt_api import build_engine

            log(f"building {name} with TensorRT {env.tensorrt_version} (Python API) on {env.gpu.name} ({env.gpu.compute_capability})")
            described = build_engine(onnx_path, staged_plan, profiles, dynamic, precision, settings)
        else:
            assert env.trtexec is not None
            from repo_builder.compile.trtexec import run_trtexec

            cmd = trtexec_command(onnx_path, (final_dir or out_dir) / name, profiles, dynamic, precision, settings, env.trtexec, device)
            log(format_command(cmd))
            script = staging / f"{name}.trtexec.sh"
            script.write_text(command_script(cmd, name, env.tensorrt_version), encoding="utf-8")
            extra_files.append(script.name)
            # Build into staging; the recorded command names the final path, which is what a rerun wants.
            run_trtexec(trtexec_command(onnx_path, staged_plan, profiles, dynamic, precision, settings, env.trtexec, device))
            from repo_builder.compile.tensorrt_api import read_engine, tensorrt_available

            if tensorrt_available():
                described = read_engine(staged_plan)
        if described is not None:
            inputs, outputs, io_source = described.inputs, described.outputs, "engine"
            engine_profiles = described.profiles or profiles
        else:
            # trtexec alone cannot describe the engine's IO; the signature is what it was built from.
            inputs, outputs, io_source = _signature_io(signature.inputs), _signature_io(signature.outputs), "onnx"
            engine_profiles = profiles
        for note in precision.notes:
            log(note)
        info = PlanInfo(
            filename=name,
            tensorrt_version=env.tensorrt_version,
            compute_capability=env.gpu.compute_capability,
            profiles=tuple(engine_profiles),
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            gpu_name=env.gpu.name,
            precision=settings.precision,
            builder=env.builder,
            io_source=io_source,
            notes=precision.notes,
        )
        existing = out_dir / SIDECAR_FILE
        write_sidecar(staging, info, existing=existing if existing.exists() else None)
        for f in (name, *extra_files, SIDECAR_FILE):
            os.replace(staging / f, out_dir / f)
    return PlanArtifact(
        plan_path=out_dir / name,
        sidecar_path=out_dir / SIDECAR_FILE,
        signature=signature,
        compute_capability=env.gpu.compute_capability,
        tensorrt_version=env.tensorrt_version,
        profiles=tuple(engine_profiles),
    )
