"""Every command line ``trtexec_command()`` can produce, run through NVIDIA's own trtexec option parser.

``../shared/tools/trtexec-parse/`` holds ``samples/common/sampleOptions.cpp`` from TensorRT release/10.3 and
main (11.1) built for CPU: ``ACCEPTED: profiles=N ...`` then one ``profile I NAME [min,] [opt,] [max,]``
line per input, or ``REJECTED:``/``UNKNOWN OPTION:``. The tests skip only where that folder is absent.
"""

from __future__ import annotations

import itertools
import re
import subprocess
from pathlib import Path

import pytest
from support.trt_fixtures import IMAGE_SIGNATURE, TEXT_SIGNATURE

from repo_builder.compile import CompileSettings, derive_profiles, parse_profile_options
from repo_builder.compile.precision import OnnxFacts, choose_precision
from repo_builder.compile.trtexec import trtexec_command
from repo_builder.spec import Profile, Signature

REPO_ROOT = Path(__file__).resolve().parents[2]
PARSERS = REPO_ROOT.parent / "shared" / "tools" / "trtexec-parse"
PARSER_FOR_MAJOR = {10: PARSERS / "trtexec-parse-10.3", 11: PARSERS / "trtexec-parse-11.1"}

# What each precision needs from the ONNX to be accepted for each major (TensorRT 11 follows the ONNX's types).
FACTS = {
    "fp32": OnnxFacts(frozenset({"FLOAT"}), has_qdq=False),
    "fp16": OnnxFacts(frozenset({"FLOAT16", "FLOAT"}), has_qdq=False),
    "bf16": OnnxFacts(frozenset({"BFLOAT16", "FLOAT"}), has_qdq=False),
    "int8": OnnxFacts(frozenset({"FLOAT"}), has_qdq=True),
}
PROFILE_LINE = re.compile(r"^\s*profile (\d+) (\S+) \[([\d,]*)\] \[([\d,]*)\] \[([\d,]*)\]$")


def _parse(major: int, cmd: list[str]) -> str:
    parser = PARSER_FOR_MAJOR[major]
    if not parser.is_file():
        pytest.skip(reason=f"NVIDIA's trtexec parser is not at {parser} (../shared/tools/trtexec-parse beside the checkout)")
    done = subprocess.run([str(parser), *cmd[1:]], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0 and done.stdout.startswith("ACCEPTED:"), f"{' '.join(cmd)}\n{done.stdout}{done.stderr}"
    return done.stdout


def _parsed_profiles(out: str) -> list[dict[str, tuple[tuple[int, ...], ...]]]:
    profiles: dict[int, dict[str, tuple[tuple[int, ...], ...]]] = {}
    for line in out.splitlines():
        m = PROFILE_LINE.match(line)
        if m:
            shapes = tuple(tuple(int(d) for d in part.split(",") if d) for part in m.group(3, 4, 5))
            profiles.setdefault(int(m.group(1)), {})[m.group(2)] = shapes
    return [profiles[i] for i in sorted(profiles)]


def _expected(profiles: tuple[Profile, ...], dynamic: tuple[str, ...]) -> list[dict[str, tuple[tuple[int, ...], ...]]]:
    return [{name: (r.min, r.opt, r.max) for name, r in p.shapes if name in dynamic} for p in profiles]


def _header(out: str) -> dict[str, str]:
    """``ACCEPTED: profiles=2 fp16=1 ... timingCacheFile=/a b/c skipInference=1`` (values may hold spaces)."""
    line = out.splitlines()[0].removeprefix("ACCEPTED: ")
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"(\w+)=(.*?)(?= \w+=|$)", line)}


TWO_TEXT_PROFILES = ("input_ids:1x1,1x16,1x16;attention_mask:1x1,1x16,1x16", "input_ids:2x16,4x64,4x64")
CASES = {
    "text, one profile": (TEXT_SIGNATURE, ()),
    "text, two profiles": (TEXT_SIGNATURE, TWO_TEXT_PROFILES),
    "image, one profile": (IMAGE_SIGNATURE, ()),
    "image, three profiles": (IMAGE_SIGNATURE, ("input:1x3x8x8,1x3x8x8,1x3x8x8", "input:1x3x8x8,4x3x8x8,4x3x8x8", "input:8x3x8x8,16x3x8x8,16x3x8x8")),
}
EXTRAS = {
    "plain": {},
    "cache, level, workspace": {"timing_cache": Path("/tmp/cache dir/timing.cache"), "opt_level": 5, "workspace_mib": 2048},
    "level 0": {"opt_level": 0},
}


def _command(signature: Signature, overrides: tuple[str, ...], precision: str, major: int, device: int, extra: dict) -> tuple[list[str], tuple[Profile, ...], tuple[str, ...]]:
    settings = CompileSettings(max_batch_size=8, max_seq_len=128, precision=precision, profiles=parse_profile_options(overrides), **extra)
    profiles = derive_profiles(signature, settings)
    dynamic = tuple(t.name for t in signature.inputs if t.dynamic_axes)
    plan = choose_precision(precision, major, FACTS[precision], flags=settings.precision_flags)
    return trtexec_command(Path("/work/m.onnx"), Path("/repo/m/1/model.plan"), profiles, dynamic, plan, settings, device=device), profiles, dynamic


@pytest.mark.parametrize("major", [10, 11])
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16", "int8"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_trtexec_command_is_accepted_by_nvidias_parser_with_its_profiles_when_each_shape_case(major: int, precision: str, case: str):
    signature, overrides = CASES[case]
    cmd, profiles, dynamic = _command(signature, overrides, precision, major, 0, {})
    out = _parse(major, cmd)
    assert _header(out)["profiles"] == str(len(profiles) if dynamic else 0)
    assert _parsed_profiles(out) == (_expected(profiles, dynamic) if dynamic else [])


@pytest.mark.parametrize("major, precision, extra, device", [
    (major, precision, name, device)
    for major, precision, name, device in itertools.product((10, 11), ("fp32", "fp16", "int8"), sorted(EXTRAS), (0, 1))
])
def test_trtexec_command_is_accepted_by_nvidias_parser_when_cache_level_workspace_device(major: int, precision: str, extra: str, device: int):
    cmd, profiles, dynamic = _command(TEXT_SIGNATURE, TWO_TEXT_PROFILES, precision, major, device, EXTRAS[extra])
    out = _parse(major, cmd)
    header = _header(out)
    settings = EXTRAS[extra]
    assert header["optLevel"] == str(settings.get("opt_level", -1))
    assert header["timingCacheFile"] == (str(settings["timing_cache"]) if "timing_cache" in settings else "")
    assert f"workspace MiB = {settings.get('workspace_mib', -1)}" in out
    assert header["skipInference"] == "1"
    if major == 10:  # precision in the graph: strongly typed, no flags, on 10 as on 11
        assert header["fp16"] == "0" and header["int8"] == "0"
        assert header["stronglyTyped"] == ("1" if precision != "fp32" else "0")
    assert _parsed_profiles(out) == _expected(profiles, dynamic)


@pytest.mark.parametrize("precision", ["fp16", "bf16", "int8"])
def test_trtexec_command_is_accepted_with_builder_flags_when_tensorrt10_and_flags_requested(precision: str):
    cmd, _, _ = _command(TEXT_SIGNATURE, TWO_TEXT_PROFILES, precision, 10, 0, {"precision_flags": True})
    header = _header(_parse(10, cmd))
    assert header["stronglyTyped"] == "0"
    assert header["fp16"] == ("1" if precision in ("fp16", "int8") else "0") and header["int8"] == str(int(precision == "int8"))


def test_trtexec_parser_rejects_repeated_shapes_without_profile_when_old_form():
    """The form the previous trtexec.py emitted: proves the parser is the real one, not an echo."""
    cmd, _, _ = _command(TEXT_SIGNATURE, TWO_TEXT_PROFILES, "fp32", 10, 0, {})
    old = [c for c in cmd if not c.startswith("--profile=")]
    parser = PARSER_FOR_MAJOR[10]
    if not parser.is_file():
        pytest.skip(reason=f"NVIDIA's trtexec parser is not at {parser}")
    done = subprocess.run([str(parser), *old[1:]], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1
    assert "Multiple --minShapes/--optShapes/--maxShapes without --profile are not allowed" in done.stdout
