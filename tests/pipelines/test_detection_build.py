"""build object-detector: bad input refused in one line (exit 2, nothing written), TensorRT profiles from
--imgsz, the ONNX Runtime backend proven live, the core path free of Ultralytics and OpenCV."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.detection_fixtures import IMGSZ, shared_tiny_detector

from repo_builder.cli.main import main

pytest.importorskip("ultralytics", reason="needs-ultralytics: the test detector is built with Ultralytics (detect extra)")


@pytest.fixture(scope="module")
def detector(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return shared_tiny_detector(tmp_path_factory.getbasetemp())


def build(*args: str) -> int:
    return main(["build", "object-detector", *args])


def classifier_onnx(path: Path) -> Path:
    """A valid ONNX that is not a detector: one input [batch, 4], one output [batch, 2]."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    onnx.save(helper.make_model(graph), str(path))
    return path


@pytest.mark.parametrize(("extra", "message"), [
    (["--imgsz", "100"], "--imgsz 100: must be a positive multiple of the model's stride 32"),
    (["--conf", "1.5"], "--conf must be between 0 and 1"),
    (["--max-det", "0"], "--max-det must be >= 1"),
    (["--classes", "a,b"], "--classes 'a,b': expected class ids"),
    (["--classes", "80"], "--classes 80: the model has classes 0..79"),
    (["--model", "x.pt"], "needs exactly one of --model PATH.pt, --from-onnx"),
])
def test_build_object_detector_refuses_in_one_line_when_an_option_is_wrong(
    detector: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "repo"
    assert build("--from-onnx", str(detector[1]), "--out", str(out), "--runtime", "python", *extra) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists() or not any(p.name.startswith("object_detector") for p in out.iterdir())


def test_build_object_detector_refuses_when_the_onnx_is_not_a_detector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert build("--from-onnx", str(classifier_onnx(tmp_path / "clf.onnx")), "--out", str(tmp_path / "repo")) == 2
    assert "expected one input [batch, 3, height, width]" in capsys.readouterr().err
    (tmp_path / "junk.onnx").write_bytes(b"not onnx")
    assert build("--from-onnx", str(tmp_path / "junk.onnx"), "--out", str(tmp_path / "repo")) == 2
    assert "not an ONNX model" in capsys.readouterr().err


def test_build_object_detector_refuses_when_labels_count_differs(detector: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\n")
    assert build("--from-onnx", str(detector[1]), "--labels", str(labels), "--out", str(tmp_path / "repo"), "--runtime", "python") == 2
    assert "2 names for a model with 80 classes" in capsys.readouterr().err


def test_build_object_detector_uses_labels_file_when_given(detector: tuple[Path, Path], tmp_path: Path) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"thing {i}\n" for i in range(80)))
    repo = tmp_path / "repo"
    assert build("--from-onnx", str(detector[1]), "--labels", str(labels), "--imgsz", str(IMGSZ), "--out", str(repo),
                 "--runtime", "python", "-q") == 0
    assert (repo / "object_detector_postprocess" / "1" / "labels.txt").read_text().splitlines()[79] == "thing 79"


def test_build_object_detector_defers_a_tensorrt_plan_with_profile_from_imgsz_when_asked(detector: tuple[Path, Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert build("--from-onnx", str(detector[1]), "--imgsz", str(IMGSZ), "--runtime", "tensorrt", "--defer-compile",
                 "--max-batch-size", "4", "--out", str(repo), "-q") == 0
    recipe = json.loads((repo / "object_detector_model" / "1" / "compile.json").read_text())
    assert recipe["profiles"] == [{"images": {"min": [1, 3, 32, 32], "opt": [4, 3, IMGSZ, IMGSZ], "max": [4, 3, IMGSZ, IMGSZ]}}]
    assert main(["validate", str(repo), "--allow-pending", "--gpu"]) == 0


@pytest.mark.triton
@pytest.mark.slow
def test_build_object_detector_passes_live_when_onnxruntime_backend_chosen(detector: tuple[Path, Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert build("--from-onnx", str(detector[1]), "--imgsz", str(IMGSZ), "--runtime", "onnxruntime", "--out", str(repo), "-q") == 0
    assert 'platform: "onnxruntime_onnx"' in (repo / "object_detector_model" / "config.pbtxt").read_text()
    assert main(["validate", str(repo), "--no-gpu", "--live"]) == 0


def test_object_detector_family_imports_neither_ultralytics_nor_opencv_when_loaded() -> None:
    code = ("import sys; import repo_builder.pipelines.registry, repo_builder.pipelines.object_detection; "
            "print(sorted(m for m in ('ultralytics', 'cv2', 'torch') if m in sys.modules))")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert found == "[]"


def test_export_object_detector_then_build_from_export_when_options_given(detector: tuple[Path, Path], tmp_path: Path) -> None:
    export = tmp_path / "export"
    assert main(["export", "object-detector", "--from-onnx", str(detector[1]), "--imgsz", str(IMGSZ), "--out", str(export), "-q"]) == 0
    assert sorted(p.name for p in export.iterdir()) == ["labels.txt", "model.onnx", "signature.json"]
    repo = tmp_path / "repo"
    assert build("--from-export", str(export), "--max-det", "7", "--runtime", "python", "--out", str(repo), "-q") == 0
    assert "MAX_DET = 7" in (repo / "object_detector_postprocess" / "1" / "model.py").read_text()
    assert "IMGSZ = [160, 160]" in (repo / "object_detector_preprocess" / "1" / "model.py").read_text()
