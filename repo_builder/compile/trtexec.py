"""Build a plan with NVIDIA's ``trtexec``: the exact command line, printed and kept beside the plan.

Several optimization profiles are given as ``--profile=0 --minShapes=.. --optShapes=.. --maxShapes=..
--profile=1 ...``: trtexec's parser (samples/common/sampleOptions.cpp) refuses repeated shape flags without
``--profile`` ("Multiple --minShapes/--optShapes/--maxShapes without --profile are not allowed"). Inputs with
no dynamic axis get no shape flags (trtexec refuses explicit shapes for static inputs). The tests run every
command this module can produce through NVIDIA's own parser for TensorRT 10.3 and 11.1.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from repo_builder.compile.precision import PrecisionChoice
from repo_builder.compile.profiles import format_shape
from repo_builder.compile_recipe import CompileSettings
from repo_builder.errors import ToolError, UserError
from repo_builder.spec import Profile

_TRT10_PRECISION_FLAGS = {"FP16": "--fp16", "BF16": "--bf16", "INT8": "--int8"}
_BANNER = re.compile(r"TensorRT v(\d{4,6})")


def find_trtexec() -> str | None:
    """trtexec from PATH, else where NVIDIA's containers and tarballs put it."""
    found = shutil.which("trtexec")
    if found:
        return found
    for candidate in ("/usr/src/tensorrt/bin/trtexec", "/opt/tensorrt/bin/trtexec"):
        if Path(candidate).is_file():
            return candidate
    return None


def decode_tensorrt_number(number: int) -> str:
    """NV_TENSORRT_VERSION as trtexec prints it: 8601 -> '8.6.1' (8.x), 100300 -> '10.3.0' (10 and later)."""
    if number >= 100000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def parse_trtexec_version(text: str) -> str | None:
    """From trtexec's banner line ``&&&& RUNNING TensorRT.trtexec [TensorRT v100300] ...``."""
    m = _BANNER.search(text)
    return decode_tensorrt_number(int(m.group(1))) if m else None


def trtexec_version(exe: str) -> str:
    try:
        done = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolError(f"cannot run {exe} ({exc})") from None
    version = parse_trtexec_version(done.stdout + done.stderr)
    if version is None:
        raise ToolError(f"{exe} --help did not print its TensorRT version banner; is it NVIDIA's trtexec?")
    return version


def _shape_spec(profile: Profile, which: str, dynamic_inputs: Sequence[str]) -> str:
    return ",".join(
        f"{name}:{format_shape(getattr(r, which))}" for name, r in profile.shapes if name in dynamic_inputs
    )


def trtexec_command(
    onnx_path: Path,
    plan_path: Path,
    profiles: Sequence[Profile],
    dynamic_inputs: Sequence[str],
    precision: PrecisionChoice,
    settings: CompileSettings,
    exe: str = "trtexec",
    device: int = 0,
) -> list[str]:
    """The argument list for one build. TensorRT 11 semantics: no precision flags (strongly typed)."""
    cmd = [exe, f"--onnx={onnx_path}", f"--saveEngine={plan_path}", "--skipInference"]
    if dynamic_inputs:
        for index, profile in enumerate(profiles):
            if len(profiles) > 1:
                cmd.append(f"--profile={index}")
            for which, flag in (("min", "--minShapes"), ("opt", "--optShapes"), ("max", "--maxShapes")):
                cmd.append(f"{flag}={_shape_spec(profile, which, dynamic_inputs)}")
    if precision.tensorrt_major <= 10:
        # TensorRT 11's trtexec has no precision flags at all (strongly typed only).
        cmd.extend(_TRT10_PRECISION_FLAGS[f] for f in precision.flags)
        if precision.strongly_typed:
            cmd.append("--stronglyTyped")
    if settings.timing_cache is not None:
        cmd.append(f"--timingCacheFile={settings.timing_cache}")
    if settings.opt_level is not None:
        cmd.append(f"--builderOptimizationLevel={settings.opt_level}")
    if settings.workspace_mib is not None:
        cmd.append(f"--memPoolSize=workspace:{settings.workspace_mib}")  # MiB, trtexec's default unit
    if device:
        cmd.append(f"--device={device}")
    return cmd


def format_command(cmd: Sequence[str]) -> str:
    return shlex.join(cmd)


def command_script(cmd: Sequence[str], plan_name: str, tensorrt_version: str) -> str:
    """The text kept beside the plan: rerunnable, and says which TensorRT ran it."""
    return (
        "#!/usr/bin/env bash\n"
        f"# How {plan_name} was built (trtexec, TensorRT {tensorrt_version}); paths are from the build machine.\n"
        f"{format_command(cmd)}\n"
    )


def first_error(log: str) -> str:
    """The line a user needs from trtexec's log: its first error, else its last line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for ln in lines:
        if "[E]" in ln or "ERROR" in ln or "Error[" in ln:
            return ln
    return lines[-1] if lines else "no output"


def run_trtexec(cmd: Sequence[str]) -> str:
    """Run a build; a failure is one line naming trtexec's own first error."""
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ToolError(f"cannot run {cmd[0]} ({exc})") from None
    log = done.stdout + done.stderr
    if done.returncode != 0:
        raise UserError(f"trtexec failed (exit {done.returncode}): {first_error(log)}")
    return log
