"""ONNX + signature -> TensorRT plan + ``plan.json``, on this machine's GPU, through the API or trtexec."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from repo_builder import dtypes
from repo_builder import gpu as gpu_mod
from repo_builder.compile import tensorrt_api
from repo_builder.compile.precision import PrecisionChoice, choose_precision, read_onnx_facts
from repo_builder.compile.profiles import derive_profiles
from repo_builder.compile.trtexec import (
    command_script,
    find_trtexec,
    format_command,
    run_trtexec,
    trtexec_command,
    trtexec_version,
)
from repo_builder.compile_recipe import CompileSettings
from repo_builder.errors import ToolError, UserError
from repo_builder.fsutil import prepare_out_dir, staging_folder
from repo_builder.plan_format import (
    DEFAULT_PLAN,
    SIDECAR_FILE,
    EngineDescription,
    EngineTensor,
    PlanInfo,
    plan_filename,
    read_engine,
    tensorrt_available,
    write_sidecar,
)
from repo_builder.spec import PlanArtifact, Profile, Signature, TensorSpec
from repo_builder.tensorrt_releases import OLDEST_SUPPORTED_MAJOR, version_parts

__all__ = ["DEFAULT_PLAN", "BuildEnvironment", "check_compile_inputs", "compile_plan", "plan_filename", "require_build_environment"]
Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


@dataclass(frozen=True)
class BuildEnvironment:
    gpu: gpu_mod.GpuInfo
    builder: str  # "api" | "trtexec"
    tensorrt_version: str
    trtexec: str | None = None

    @property
    def tensorrt_major(self) -> int:
        return (version_parts(self.tensorrt_version) or (0,))[0]


def check_tensorrt_major(version: str, where: str) -> None:
    """TensorRT 8.x/9.x are refused: their ``create_network(0)`` is an implicit-batch network that the ONNX
    parser rejects, their trtexec needs ``--explicitBatch``, and no Triton release we target ships them."""
    major = (version_parts(version) or (0,))[0]
    if major < OLDEST_SUPPORTED_MAJOR:
        raise ToolError(
            f"{where} is TensorRT {version}; repo-builder builds with TensorRT {OLDEST_SUPPORTED_MAJOR} or later "
            "(Triton 24.05+): use a newer NGC container (nvcr.io/nvidia/tensorrt:24.05-py3 or later)"
        )


def require_buildable_tensorrt(expected: str) -> None:
    """The serving Triton's TensorRT must be one repo-builder builds for (10+), else a usage error (exit 2)."""
    major = (version_parts(expected) or (0,))[0]
    if major < OLDEST_SUPPORTED_MAJOR:
        raise UserError(
            f"the serving Triton ships TensorRT {expected}; repo-builder builds plans with TensorRT "
            f"{OLDEST_SUPPORTED_MAJOR} or later only (Triton 24.05+): serve with a newer Triton release"
        )


def require_build_environment(builder: str, device: int = 0) -> BuildEnvironment:
    """Everything a build needs, or one ToolError line naming every missing piece (exit 3)."""
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
        raise ToolError("cannot build a TensorRT plan here: " + "; ".join(missing))
    gpu = gpu_mod.require_gpu(device)
    if has_api and device != 0:
        raise UserError(
            f"--device {device} with TensorRT's Python API: the API builds on CUDA device 0; "
            f"run with CUDA_VISIBLE_DEVICES={gpu.index} instead, or use --builder trtexec"
        )
    if has_api:
        version = tensorrt_api.tensorrt_version()
        check_tensorrt_major(version, "the TensorRT Python package")
        return BuildEnvironment(gpu, "api", version)
    assert exe is not None
    version = trtexec_version(exe)
    check_tensorrt_major(version, exe)
    return BuildEnvironment(gpu, "trtexec", version, exe)


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


def _build_with_trtexec(
    env: BuildEnvironment, onnx_path: Path, staging: Path, name: str, recorded_plan: Path,
    profiles: tuple[Profile, ...], dynamic: tuple[str, ...], precision: PrecisionChoice, settings: CompileSettings,
    log: Log, device: int,
) -> tuple[EngineDescription | None, list[str]]:
    assert env.trtexec is not None
    cmd = trtexec_command(onnx_path, recorded_plan, profiles, dynamic, precision, settings, env.trtexec, device)
    log(format_command(cmd))
    script = staging / f"{name}.trtexec.sh"
    script.write_text(command_script(cmd, name, env.tensorrt_version), encoding="utf-8")
    # Build into staging; the recorded command names the final path, which is what a rerun wants.
    run_trtexec(trtexec_command(onnx_path, staging / name, profiles, dynamic, precision, settings, env.trtexec, device))
    described = read_engine(staging / name) if tensorrt_available() else None
    return described, [script.name]


def _plan_info(
    name: str, env: BuildEnvironment, described: EngineDescription | None, signature: Signature,
    profiles: tuple[Profile, ...], settings: CompileSettings, precision: PrecisionChoice,
) -> PlanInfo:
    if described is not None:
        inputs, outputs, io_source = described.inputs, described.outputs, "engine"
        engine_profiles = described.profiles or profiles
    else:
        # trtexec alone cannot describe the engine's IO; the signature is what it was built from.
        inputs, outputs, io_source = _signature_io(signature.inputs), _signature_io(signature.outputs), "onnx"
        engine_profiles = profiles
    return PlanInfo(
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

    Raises ToolError without a GPU or TensorRT/trtexec, UserError when the ONNX or settings cannot build.
    ``final_dir``: where the files will end up when the caller moves them on (named in the trtexec script).
    """
    log = log or _stderr
    onnx_path = Path(onnx_path)
    out_dir = Path(out_dir)
    profiles = check_compile_inputs(onnx_path, signature, settings)
    env = require_build_environment(settings.builder, device)
    precision = choose_precision(settings.precision, env.tensorrt_major, read_onnx_facts(onnx_path), flags=settings.precision_flags)
    dynamic = tuple(t.name for t in signature.inputs if t.dynamic_axes)
    name = plan_filename(env.gpu.compute_capability, settings.per_capability)
    prepare_out_dir(out_dir)
    with staging_folder(out_dir, ".compile-staging-") as staging:
        extra_files: list[str] = []
        if env.builder == "api":
            log(f"building {name} with TensorRT {env.tensorrt_version} (Python API) on {env.gpu.name} ({env.gpu.compute_capability})")
            described: EngineDescription | None = tensorrt_api.build_engine(onnx_path, staging / name, profiles, dynamic, precision, settings, log)
        else:
            described, extra_files = _build_with_trtexec(
                env, onnx_path, staging, name, (final_dir or out_dir) / name, profiles, dynamic, precision, settings, log, device
            )
        for note in precision.notes:
            log(note)
        info = _plan_info(name, env, described, signature, profiles, settings, precision)
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
        profiles=info.profiles,
    )
