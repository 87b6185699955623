"""Real TensorRT builds: only on a machine with an NVIDIA GPU and TensorRT (scripts/gpu-check runs these)."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from support.trt_fixtures import IMAGE_SIGNATURE, TENSORRT_CONFIG, make_image_onnx
from tritonclient.grpc import model_config_pb2

from repo_builder.compile import (
    CompileSettings,
    compile_pending,
    compile_plan,
    defer_plan,
    find_pending,
    read_sidecar,
)
from repo_builder.compile.trtexec import find_trtexec
from repo_builder.gpu import gpu_present
from repo_builder.plan_format import tensorrt_available
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import ValidateOptions

pytestmark = pytest.mark.gpu
_GPU = gpu_present()
needs_api = pytest.mark.skipif(
    not (_GPU and tensorrt_available()),
    reason="needs an NVIDIA GPU and the TensorRT Python package" + ("" if _GPU else " (no GPU detected)"),
)
needs_trtexec = pytest.mark.skipif(
    not (_GPU and find_trtexec()),
    reason="needs an NVIDIA GPU and trtexec on PATH" + ("" if _GPU else " (no GPU detected)"),
)


@needs_api
def test_compile_plan_writes_plan_and_sidecar_read_back_from_engine_when_api(tmp_path: Path):
    onnx_path = make_image_onnx(tmp_path / "export" / "model.onnx")
    cache = tmp_path / "timing.cache"
    artifact = compile_plan(onnx_path, IMAGE_SIGNATURE, tmp_path / "out", CompileSettings(max_batch_size=4, precision="fp32", builder="api", timing_cache=cache))
    assert artifact.plan_path.stat().st_size > 0 and cache.stat().st_size > 0
    info = read_sidecar(artifact.sidecar_path)["model.plan"]
    assert info.io_source == "engine" and info.builder == "api"
    assert [(t.name, t.dtype, t.shape) for t in info.inputs] == [("input", "FLOAT", (-1, 3, 8, 8))]
    assert info.profiles[0]["input"].max == (4, 3, 8, 8)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["model.plan", "plan.json"]


@needs_api
def test_compile_plan_names_plan_by_capability_when_per_capability(tmp_path: Path):
    onnx_path = make_image_onnx(tmp_path / "export" / "model.onnx")
    artifact = compile_plan(onnx_path, IMAGE_SIGNATURE, tmp_path / "out", CompileSettings(precision="fp32", per_capability=True))
    assert artifact.plan_path.name == f"model_sm{artifact.compute_capability.replace('.', '')}.plan"


@needs_trtexec
def test_compile_plan_keeps_command_beside_plan_when_trtexec(tmp_path: Path):
    onnx_path = make_image_onnx(tmp_path / "export" / "model.onnx")
    artifact = compile_plan(onnx_path, IMAGE_SIGNATURE, tmp_path / "out", CompileSettings(precision="fp32", builder="trtexec"))
    script = (tmp_path / "out" / "model.plan.trtexec.sh").read_text()
    assert f"--saveEngine={artifact.plan_path}" in script and "--minShapes=input:1x3x8x8" in script


@needs_api
def test_compile_pending_builds_in_place_updates_config_and_passes_validate_when_gpu(tmp_path: Path):
    onnx_path = make_image_onnx(tmp_path / "export" / "model.onnx")
    repo = tmp_path / "repo"
    (repo / "classifier").mkdir(parents=True)
    (repo / "classifier" / "config.pbtxt").write_text(TENSORRT_CONFIG)
    defer_plan(onnx_path, IMAGE_SIGNATURE, repo / "classifier" / "1", CompileSettings(max_batch_size=4, precision="fp32"))
    result = compile_pending(repo)
    assert find_pending(repo) == []
    assert [a.plan_path.name for a in result.built] == ["model.plan"]
    assert not (repo / "classifier" / "1" / "model.source.onnx").exists()
    config = text_format.Parse((repo / "classifier" / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    assert config.max_batch_size == 4
    report = validate_repository(repo, ValidateOptions(gpu_present=True))
    assert not [d for d in report.diagnostics if d.code.startswith("RB7") and d.severity == "error"]
