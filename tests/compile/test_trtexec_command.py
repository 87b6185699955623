from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from support.trt_fixtures import IMAGE_SIGNATURE, TEXT_SIGNATURE, make_image_onnx

from repo_builder.compile import CompileSettings, derive_profiles, parse_profile_options
from repo_builder.compile.precision import OnnxFacts, choose_precision, read_onnx_facts
from repo_builder.compile.tensorrt_api import ParserError, format_parser_errors
from repo_builder.compile.trtexec import (
    command_script,
    decode_tensorrt_number,
    first_error,
    parse_trtexec_version,
    trtexec_command,
)
from repo_builder.errors import UserError

FP32_FACTS = OnnxFacts(frozenset({"FLOAT"}), has_qdq=False)
FP16_FACTS = OnnxFacts(frozenset({"FLOAT16", "FLOAT"}), has_qdq=False)
QDQ_FACTS = OnnxFacts(frozenset({"FLOAT"}), has_qdq=True)


def _text_command(major: int, facts: OnnxFacts, precision: str = "fp16", **extra) -> list[str]:
    settings = CompileSettings(max_batch_size=8, max_seq_len=256, precision=precision, **extra)
    profiles = derive_profiles(TEXT_SIGNATURE, settings)
    plan = choose_precision(precision, major, facts, flags=settings.precision_flags)
    return trtexec_command(Path("m.onnx"), Path("out/model.plan"), profiles, ("input_ids", "attention_mask"), plan, settings)


def test_trtexec_command_builds_strongly_typed_when_tensorrt10_and_precision_in_the_graph():
    cmd = _text_command(10, FP16_FACTS)
    assert cmd[-1] == "--stronglyTyped" and not {"--fp16", "--int8", "--bf16", "--best"} & set(cmd)


def test_choose_precision_refuses_fp16_when_tensorrt10_and_onnx_is_fp32_and_no_flags_asked_for():
    with pytest.raises(UserError, match=r"strongly typed.*'repo-builder compile --precision fp16' converts it.*--precision-flags"):
        choose_precision("fp16", 10, FP32_FACTS)


def test_trtexec_command_uses_fp16_flag_when_tensorrt10_and_flags_requested():
    assert _text_command(10, FP32_FACTS, precision_flags=True) == [
        "trtexec",
        "--onnx=m.onnx",
        "--saveEngine=out/model.plan",
        "--skipInference",
        "--minShapes=input_ids:1x1,attention_mask:1x1",
        "--optShapes=input_ids:8x128,attention_mask:8x128",
        "--maxShapes=input_ids:8x256,attention_mask:8x256",
        "--fp16",
    ]


def test_trtexec_command_has_no_precision_flags_when_tensorrt11():
    cmd = _text_command(11, FP16_FACTS)
    assert not {"--fp16", "--int8", "--best", "--bf16", "--stronglyTyped"} & set(cmd)
    assert cmd[:4] == ["trtexec", "--onnx=m.onnx", "--saveEngine=out/model.plan", "--skipInference"]


def test_choose_precision_refuses_fp16_when_tensorrt11_and_onnx_is_fp32():
    with pytest.raises(UserError, match=r"strongly typed.*--precision fp32") as info:
        choose_precision("fp16", 11, FP32_FACTS)
    assert "\n" not in str(info.value)


def test_choose_precision_says_what_was_done_when_each_version():
    ten = choose_precision("fp16", 10, FP32_FACTS, flags=True)
    eleven = choose_precision("fp16", 11, FP16_FACTS)
    assert ten.flags == ("FP16",) and not ten.strongly_typed and "builder flag FP16" in ten.notes[0]
    assert eleven.flags == () and eleven.strongly_typed and "FLOAT16 from the model" in eleven.notes[0]


def test_trtexec_command_uses_int8_and_fp16_when_tensorrt10_and_qdq_model_and_flags_requested():
    cmd = _text_command(10, QDQ_FACTS, precision="int8", precision_flags=True)
    assert cmd[-2:] == ["--int8", "--fp16"]
    assert _text_command(10, QDQ_FACTS, precision="int8")[-1] == "--stronglyTyped"  # by default: Q/DQ in the graph decide


def test_choose_precision_refuses_int8_when_model_has_no_qdq_nodes():
    for major in (10, 11):
        with pytest.raises(UserError, match="QuantizeLinear/DequantizeLinear"):
            choose_precision("int8", major, FP32_FACTS)


def test_trtexec_command_numbers_each_profile_when_several_profiles():
    overrides = parse_profile_options(["input_ids:1x1,1x16,1x16;attention_mask:1x1,1x16,1x16", "input_ids:2x16,4x64,4x64"])
    settings = CompileSettings(max_batch_size=4, max_seq_len=64, precision="fp32", profiles=overrides)
    profiles = derive_profiles(TEXT_SIGNATURE, settings)
    cmd = trtexec_command(Path("m.onnx"), Path("p.plan"), profiles, ("input_ids", "attention_mask"), choose_precision("fp32", 10, FP32_FACTS), settings)
    shapes = [c for c in cmd if c.startswith(("--profile", "--minShapes", "--optShapes", "--maxShapes"))]
    assert shapes == [
        "--profile=0",
        "--minShapes=input_ids:1x1,attention_mask:1x1",
        "--optShapes=input_ids:1x16,attention_mask:1x16",
        "--maxShapes=input_ids:1x16,attention_mask:1x16",
        "--profile=1",
        "--minShapes=input_ids:2x16,attention_mask:1x1",
        "--optShapes=input_ids:4x64,attention_mask:4x64",
        "--maxShapes=input_ids:4x64,attention_mask:4x64",
    ]


def test_trtexec_command_omits_shapes_when_inputs_static():
    settings = CompileSettings(max_batch_size=0, precision="fp32")
    profiles = derive_profiles(IMAGE_SIGNATURE, settings)
    cmd = trtexec_command(Path("m.onnx"), Path("p.plan"), profiles, (), choose_precision("fp32", 10, FP32_FACTS), settings)
    assert not any("Shapes=" in c for c in cmd)


def test_trtexec_command_passes_cache_level_and_workspace_when_set(tmp_path: Path):
    cache = tmp_path / "timing.cache"
    cmd = _text_command(10, FP32_FACTS, timing_cache=cache, opt_level=5, workspace_mib=2048, precision_flags=True)
    assert cmd[-3:] == [f"--timingCacheFile={cache}", "--builderOptimizationLevel=5", "--memPoolSize=workspace:2048"]


def test_command_script_reruns_the_exact_command_when_read_back():
    cmd = ["trtexec", "--onnx=/data/my model.onnx", "--saveEngine=/repo/m/1/model.plan", "--fp16"]
    script = command_script(cmd, "model.plan", "10.3.0")
    assert script.startswith("#!/usr/bin/env bash\n")
    assert shlex.split(script.strip().splitlines()[-1]) == cmd
    assert "TensorRT 10.3.0" in script


@pytest.mark.parametrize("number, version", [(8601, "8.6.1"), (100300, "10.3.0"), (101300, "10.13.0"), (110000, "11.0.0")])
def test_decode_tensorrt_number_reads_version_when_banner_number(number: int, version: str):
    assert decode_tensorrt_number(number) == version


def test_parse_trtexec_version_reads_banner_when_present():
    banner = "&&&& RUNNING TensorRT.trtexec [TensorRT v100300] [b26] # trtexec --help\n=== Model Options ==="
    assert parse_trtexec_version(banner) == "10.3.0"
    assert parse_trtexec_version("usage: something else") is None


def test_first_error_picks_tensorrt_error_line_when_log_has_one():
    log = "[I] start\n[E] [TRT] ModelImporter.cpp:771: ERROR: node Resize_3 unsupported\n[I] done\n"
    assert "Resize_3" in first_error(log)


def test_format_parser_errors_names_nodes_when_parser_fails():
    line = format_parser_errors(
        Path("m.onnx"),
        [ParserError("unsupported mode cubic", 12, "Resize_3", "Resize"), ParserError("no importer", 40, "Foo_1", "Foo")],
    )
    assert "node 12 'Resize_3' (Resize): unsupported mode cubic" in line
    assert "node 40 'Foo_1' (Foo)" in line and "\n" not in line


def test_read_onnx_facts_sees_float_types_and_no_qdq_when_tiny_model(tmp_path: Path):
    facts = read_onnx_facts(make_image_onnx(tmp_path / "m.onnx"))
    assert facts.float_types == frozenset({"FLOAT"}) and not facts.has_qdq
