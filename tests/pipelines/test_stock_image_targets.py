"""Issue 35's done-when: each family's default build for a Triton release loads where it is deployed.

Each family is built with its defaults for a release (default runtime: the image's ONNX Runtime backend,
served here through the stand-in), then proven with ``validate --live`` on the embedded Triton running every
Python step on the image's Python (pyenv's 3.12 for 24.12, 3.10 for 24.05) in a fresh environment that holds
only the image's packages: the Python steps load only through what the build shipped. The same repository
with its shipped packages removed must fail with the stub's own ModuleNotFoundError, so the proof can fail.
CI runs each kind of step (see MATRIX); ``REPO_BUILDER_STOCK_MATRIX=full`` and ``scripts/bench/stock_image.py`` the
whole matrix.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.main import main
from repo_builder.triton.image_python import find_interpreter
from repo_builder.triton_images import image_row

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _needs_python(release: str) -> None:
    version = image_row(release).python
    if find_interpreter(version) is None:
        pytest.skip(reason=f"Python {version} (the {release} image's) is not installed here: pyenv install {version}")


def _resnet50(base: Path) -> list[str]:
    return ["resnet50", "--weights", "random"]


def _text_classifier(base: Path) -> list[str]:
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    folder = base / "tiny-bert"
    if not folder.is_dir():
        make_tiny_text_classifier(folder, num_labels=3, seed=0)
    return ["text-classifier", "--model", str(folder)]


def _text_embedder(base: Path) -> list[str]:
    from repo_builder.export.tiny_embedder import make_tiny_sentence_transformer

    folder = base / "tiny-st"
    if not folder.is_dir():
        make_tiny_sentence_transformer(folder)
    return ["text-embedder", "--model", str(folder)]


def _token_classifier(base: Path) -> list[str]:
    from repo_builder.export.tiny_token_classifier import make_tiny_token_classifier

    folder = base / "tiny-ner"
    if not folder.is_dir():
        make_tiny_token_classifier(folder)
    return ["token-classifier", "--model", str(folder)]


def _object_detector(base: Path) -> list[str]:
    pytest.importorskip("ultralytics")
    from support.detection_fixtures import shared_tiny_detector

    _, onnx_path = shared_tiny_detector(base)
    return ["object-detector", "--from-onnx", str(onnx_path)]


def _instance_segmenter(base: Path) -> list[str]:
    pytest.importorskip("ultralytics")
    from support.detection_fixtures import IMGSZ, build_tiny_checkpoint
    from ultralytics import YOLO

    onnx_path = base / "tiny-seg" / "seg.onnx"
    if not onnx_path.is_file():
        checkpoint = build_tiny_checkpoint(base / "tiny-seg", yaml="yolov8n-seg.yaml")
        exported = YOLO(str(checkpoint), task="segment").export(format="onnx", imgsz=IMGSZ, dynamic=True, verbose=False)
        Path(exported).replace(onnx_path)
    return ["instance-segmenter", "--from-onnx", str(onnx_path)]


def _text_recognizer(base: Path) -> list[str]:
    pytest.importorskip("rapidocr_onnxruntime", reason="needs-rapidocr: the PP-OCR models come from its wheel (test extra)")
    return ["text-recognizer", "--from-rapidocr"]


FAMILIES: dict[str, Callable[[Path], list[str]]] = {
    "resnet50": _resnet50,
    "text-classifier": _text_classifier,
    "text-embedder": _text_embedder,
    "token-classifier": _token_classifier,
    "object-detector": _object_detector,
    "instance-segmenter": _instance_segmenter,
    "text-recognizer": _text_recognizer,
}
NEGATIVE = {"resnet50", "token-classifier"}  # proven to fail without what they ship (Pillow; tokenizers in two steps)
# CI runs each kind of step once (Pillow, tokenizers before and after the model, tokenizers with no postprocess,
# OpenCV, OCR's Pillow + OpenCV + pyclipper step calling three models) on 24.12 and one family on 3.10's 24.05; REPO_BUILDER_STOCK_MATRIX=full runs every family on both, as
# scripts/bench/stock_image.py does for BENCHMARKS.md.
FULL = os.environ.get("REPO_BUILDER_STOCK_MATRIX") == "full"
MATRIX = [(r, f) for r in ("24.12", "24.05") for f in FAMILIES] if FULL else [
    ("24.12", "resnet50"), ("24.12", "token-classifier"), ("24.12", "text-embedder"), ("24.12", "object-detector"),
    ("24.12", "text-recognizer"), ("24.05", "resnet50"),
]


def _build(args: list[str], out: Path, release: str, capsys: Any, *extra: str) -> dict[str, Any]:
    code = main(["build", *args, "--out", str(out), "--triton-release", release, "--no-parity", "--format", "json", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    return dict(json.loads(captured.out))


@pytest.mark.parametrize(("release", "family"), MATRIX, ids=[f"{r}-{f}" for r, f in MATRIX])
def test_default_build_loads_on_the_image_python_when_built_for_a_release(
    release: str, family: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, capsys: Any
) -> None:
    _needs_python(release)
    args = FAMILIES[family](tmp_path_factory.getbasetemp())
    capsys.readouterr()  # what making the model printed (Ultralytics' summary) is not build's output
    out = tmp_path / "repo"
    summary = _build(args, out, release, capsys, "--live")
    row = image_row(release)
    assert summary["target"].startswith(f"Triton {release} ({row.image}, Python {row.python}")
    assert summary["runtime"] == "onnxruntime"  # the target's backend, not ONNX Runtime inside the Python backend
    assert summary["validation"]["ok"], summary["validation"]["diagnostics"]
    live = summary["validation"]["live"]
    python_steps = [name for name in live if (out / name / "1" / "model.py").is_file()]
    assert python_steps and all(live[name]["status"] == "loaded" for name in python_steps), live
    assert all(m["status"] == "loaded" for m in live.values()), live
    manifest = json.loads((out / "repo-builder.json").read_text(encoding="utf-8"))
    assert manifest["target"]["release"] == release and manifest["target"]["python"] == row.python

    shipped = [out / name / "1" / "site-packages" for name in python_steps if (out / name / "1" / "site-packages").is_dir()]
    assert shipped, "no step shipped anything: every family's default steps import a package the image lacks"
    if family not in NEGATIVE:
        return
    # The proof can fail: without what was shipped, the image's Python cannot import the steps.
    for folder in shipped:
        shutil.rmtree(folder)
    code = main(["validate", str(out), "--live", "--select", "RB9", "--format", "json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    failed = " ".join(d["message"] for d in report["diagnostics"] if d["code"] == "RB905")
    assert "ModuleNotFoundError: No module named" in failed, report["diagnostics"]


def test_onnx_tokenizer_build_names_no_build_machine_path_when_built_for_an_image(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, capsys: Any
) -> None:
    args = _text_classifier(tmp_path_factory.getbasetemp())
    capsys.readouterr()
    code = main(["build", *args, "--preprocess", "onnx", "--out", str(tmp_path / "refused"), "--no-parity", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "has no onnxruntime-extensions" in err and "--step-packages dockerfile" in err
    assert not (tmp_path / "refused").exists()

    out = tmp_path / "repo"
    summary = _build([*args, "--preprocess", "onnx"], out, "24.12", capsys, "--step-packages", "dockerfile")
    configs = "\n".join(p.read_text(encoding="utf-8") for p in out.glob("*/config.pbtxt"))
    import onnxruntime_extensions

    local = str(Path(onnxruntime_extensions.__file__).parent)
    assert local not in configs and str(Path.home()) not in configs
    assert "/usr/local/lib/python3.12/dist-packages/onnxruntime_extensions/" in configs
    dockerfile = (out / "Dockerfile").read_text(encoding="utf-8")
    assert dockerfile.startswith("# Generated by repo-builder") and "FROM nvcr.io/nvidia/tritonserver:24.12-py3" in dockerfile
    assert f"onnxruntime-extensions=={onnxruntime_extensions.__version__}" in dockerfile
    manifest = json.loads((out / "repo-builder.json").read_text(encoding="utf-8"))
    assert manifest["target"]["step_packages"] == "dockerfile" and manifest["target"]["dockerfile"] == "Dockerfile"
    assert not list(out.glob("*/1/site-packages")), "dockerfile mode ships nothing"
    assert summary["validation"]["ok"]


def test_python_runtime_build_loads_in_poll_mode_on_the_image_python_when_it_ships_onnxruntime(tmp_path: Path, capsys: Any) -> None:
    """The shipped packages' place (the version folder) is one Triton's poll mode loads from, and ONNX Runtime
    shipped for the image's Python runs the model step when --runtime python is asked for."""
    import numpy as np
    from support.nvcf_helpers import make_image

    from repo_builder.triton import start_server
    from repo_builder.triton.client import connect, infer_model
    from repo_builder.triton.image_python import prepare_image_python

    _needs_python("24.12")
    out = tmp_path / "repo"
    summary = _build(["resnet50", "--weights", "random", "--runtime", "python", "--top-k", "3"], out, "24.12", capsys)
    assert summary["runtime"] == "python"
    assert (out / "resnet50_model" / "1" / "site-packages" / "onnxruntime").is_dir()
    image = prepare_image_python(image_row("24.12"))
    assert not isinstance(image, str), image
    with start_server(out, mode="poll", image_python=image, startup_timeout=180) as server:
        client = connect(server.grpc_url)
        outputs = infer_model(client, "resnet50", {"IMAGE": np.array([[make_image(320, 240, "JPEG", 1)]], dtype=np.object_)})
        # The image's environment has neither PIL nor onnxruntime: an answer means the shipped ones ran.
        assert outputs["LABELS"].shape == (1, 3) and float(outputs["SCORES"][0].sum()) <= 1.0 + 1e-5
