"""``build <image family> --preprocess dali``: the preprocess step is a DALI model (model.dali, backend "dali",
GPU instances), the ensemble takes the encoded bytes as TYPE_UINT8 [-1]; offline validate judges it as the DALI
backend would; ``--live`` on the embedded Triton (no DALI backend) reports it, and the ensemble using it, as
not proven (RB904), never as passed."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_builder.cli.main import main
from repo_builder.render.parse_back import parse_config
from repo_builder.validate.analysis.dali_pipeline import read_dali_pipeline
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Severity, ValidateOptions

pytest.importorskip("nvidia.dali", reason="needs the dali extra (nvidia-dali-cuda120)")
pytestmark = [pytest.mark.slow]
NAME = "mnet"


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dali-build") / "repo"
    argv = ["build", "image-classifier", "--model", "torchvision:mobilenet_v3_small", "--weights", "random", "--runtime", "onnxruntime",
            "--preprocess", "dali", "--name", NAME, "--out", str(out), "-q"]
    assert main(argv) == 0
    return out


def test_build_writes_dali_step_with_gpu_instances_and_uint8_input_when_preprocess_dali(repo: Path) -> None:
    folder = repo / f"{NAME}_preprocess"
    config = parse_config((folder / "config.pbtxt").read_text(encoding="utf-8"), "config.pbtxt")
    assert config.backend == "dali" and config.max_batch_size == 8
    (image,) = config.input
    assert (image.name, list(image.dims), image.allow_ragged_batch) == ("IMAGE", [-1], True)
    assert image.data_type == 2  # TYPE_UINT8
    assert [g.kind for g in config.instance_group] == [1]  # KIND_GPU
    (pixels,) = config.output
    assert list(pixels.dims) == [3, 224, 224]
    pipeline = read_dali_pipeline((folder / "1" / "model.dali").read_bytes())
    assert pipeline.inputs == ("IMAGE",) and len(pipeline.outputs) == 1
    assert dict((op.name, op.devices) for op in pipeline.ops)["decoders__Image"] == ("gpu",)
    ensemble = parse_config((repo / NAME / "config.pbtxt").read_text(encoding="utf-8"), "config.pbtxt")
    assert [(t.name, t.data_type, list(t.dims)) for t in ensemble.input] == [("IMAGE", 2, [-1])]
    assert not (folder / "1" / "model.py").exists()


def test_validate_passes_dali_repository_on_gpu_target_and_refuses_it_on_cpu_target(repo: Path) -> None:
    assert validate_repository(repo, ValidateOptions()).ok
    on_cpu = validate_repository(repo, ValidateOptions(gpu_present=False))
    assert any(d.code == "RB413" and d.model == f"{NAME}_preprocess" for d in on_cpu.diagnostics)


@pytest.mark.triton
def test_validate_live_reports_dali_step_and_its_ensemble_not_proven_when_server_has_no_dali_backend(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(repo), "--live", "--format", "json", "--load-timeout", "120"]) != 0
    import json

    report = json.loads(capsys.readouterr().out)
    by_model = {}
    for d in report["diagnostics"]:
        by_model.setdefault(d["model"], []).append(d)
    for name in (f"{NAME}_preprocess", NAME):
        codes = {(d["code"], d["severity"]) for d in by_model.get(name, [])}
        assert ("RB904", Severity.ERROR.value) in codes, (name, by_model.get(name))
    models = {m["name"]: m for m in report["models"]}
    assert not models[f"{NAME}_preprocess"]["ok"] and not models[NAME]["ok"]
    assert models[f"{NAME}_model"]["ok"]  # the ONNX model itself is proven through the stand-in


def test_build_refuses_preprocess_dali_with_nvcf_assets_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "repo"
    argv = ["build", "image-classifier", "--model", "torchvision:mobilenet_v3_small", "--weights", "random", "--runtime", "onnxruntime",
            "--preprocess", "dali", "--nvcf-assets", "--out", str(out), "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--preprocess dali cannot read NVCF assets" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


def test_build_refuses_resize_with_torch_for_a_dali_step_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "repo"
    argv = ["build", "image-classifier", "--model", "torchvision:mobilenet_v3_small", "--weights", "random", "--runtime", "onnxruntime",
            "--preprocess", "dali", "--resize-with", "torch", "--out", str(out), "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--resize-with torch is for the Python step; --preprocess dali resizes on the GPU" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


def test_build_refuses_preprocess_dali_on_no_gpu_target_before_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "repo"
    argv = ["build", "image-classifier", "--model", "torchvision:mobilenet_v3_small", "--weights", "random", "--runtime", "onnxruntime",
            "--preprocess", "dali", "--no-gpu", "--out", str(out), "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--preprocess dali runs on a GPU server" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


def test_build_object_detector_writes_dali_letterbox_when_preprocess_dali(tmp_path_factory: pytest.TempPathFactory) -> None:
    pytest.importorskip("ultralytics", reason="needs-ultralytics: the test detector is built with Ultralytics (detect extra)")
    from support.detection_fixtures import IMGSZ, shared_tiny_detector

    _, onnx_path = shared_tiny_detector(tmp_path_factory.getbasetemp())
    out = tmp_path_factory.mktemp("dali-detector") / "repo"
    assert main(["build", "object-detector", "--from-onnx", str(onnx_path), "--imgsz", str(IMGSZ), "--runtime", "onnxruntime",
                 "--preprocess", "dali", "--name", "det", "--out", str(out), "-q"]) == 0
    config = parse_config((out / "det_preprocess" / "config.pbtxt").read_text(encoding="utf-8"), "config.pbtxt")
    assert config.backend == "dali" and [o.name for o in config.output][1] == "IMAGE_SHAPES"
    pipeline = read_dali_pipeline((out / "det_preprocess" / "1" / "model.dali").read_bytes())
    assert len(pipeline.outputs) == 2 and pipeline.inputs == ("IMAGE",)
    ensemble = parse_config((out / "det" / "config.pbtxt").read_text(encoding="utf-8"), "config.pbtxt")
    assert "IMGSZ" not in {t.name for t in ensemble.input}
    assert validate_repository(out, ValidateOptions()).ok
