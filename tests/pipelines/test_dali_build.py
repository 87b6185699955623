"""``build <image family> --preprocess dali``: the preprocess step is a DALI model (model.dali, backend "dali",
GPU instances), the ensemble takes the encoded bytes as TYPE_UINT8 [-1]; offline validate judges it as the DALI
backend would; ``--live`` on the embedded Triton (no DALI backend) reports it, and the ensemble using it, as
not proven (RB904), never as passed. ``--max-image-pixels`` reaches the DALI graph and the postprocess step, which
refuses, on the embedded Triton, a request whose image the DALI step did not decode."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from repo_builder.cli.main import main
from repo_builder.render.context import DEFAULT_MAX_IMAGE_PIXELS
from repo_builder.render.parse_back import parse_config
from repo_builder.validate.analysis.dali_pipeline import read_dali_pipeline
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Severity, ValidateOptions

pytest.importorskip("nvidia.dali", reason="needs the dali extra (nvidia-dali-cuda120)")
pytestmark = [pytest.mark.slow]
NAME = "mnet"
LIMIT = 50_000_000  # not the default: the build's --max-image-pixels must reach the DALI step and postprocess


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dali-build") / "repo"
    argv = ["build", "image-classifier", "--model", "torchvision:mobilenet_v3_small", "--weights", "random", "--runtime", "onnxruntime",
            "--preprocess", "dali", "--max-image-pixels", str(LIMIT), "--name", NAME, "--out", str(out), "-q"]
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
    pixels, size = config.output
    assert list(pixels.dims) == [3, 224, 224]
    assert (size.name, size.data_type, list(size.dims)) == ("IMAGE_SIZE", 9, [2])  # TYPE_INT64: the header's h, w
    pipeline = read_dali_pipeline((folder / "1" / "model.dali").read_bytes())
    assert pipeline.inputs == ("IMAGE",) and len(pipeline.outputs) == 2
    assert dict((op.name, op.devices) for op in pipeline.ops)["decoders__Image"] == ("gpu",)
    ensemble = parse_config((repo / NAME / "config.pbtxt").read_text(encoding="utf-8"), "config.pbtxt")
    assert [(t.name, t.data_type, list(t.dims)) for t in ensemble.input] == [("IMAGE", 2, [-1])]
    assert not (folder / "1" / "model.py").exists()


def test_build_carries_max_image_pixels_into_model_dali_and_image_size_to_postprocess(repo: Path) -> None:
    from dataclasses import replace

    from repo_builder.pipelines.dali_preprocess import ClassifierPlan, define_classifier

    # mobilenet_v3_small's weights transforms; only the limit differs between the two graphs compared.
    plan = ClassifierPlan(256, (224, 224), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), max_image_pixels=LIMIT)
    served = (repo / f"{NAME}_preprocess" / "1" / "model.dali").read_bytes()
    assert served == bytes(define_classifier(plan, "gpu", max_batch_size=8).serialize())
    assert served != bytes(define_classifier(replace(plan, max_image_pixels=LIMIT + 1), "gpu", max_batch_size=8).serialize())
    post = parse_config((repo / f"{NAME}_postprocess" / "config.pbtxt").read_text(encoding="utf-8"), "config.pbtxt")
    assert [(t.name, list(t.dims)) for t in post.input] == [("LOGITS", [1000]), ("IMAGE_SIZE", [2])]
    assert f"MAX_IMAGE_PIXELS = {LIMIT}\n" in (repo / f"{NAME}_postprocess" / "1" / "model.py").read_text(encoding="utf-8")
    ensemble = parse_config((repo / NAME / "config.pbtxt").read_text(encoding="utf-8"), "config.pbtxt")
    steps = {step.model_name: step for step in ensemble.ensemble_scheduling.step}
    assert steps[f"{NAME}_preprocess"].output_map["IMAGE_SIZE"] == steps[f"{NAME}_postprocess"].input_map["IMAGE_SIZE"]


@pytest.fixture(scope="module")
def postprocess_server(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The DALI build's postprocess step alone on the embedded Triton (which has no DALI backend)."""
    from repo_builder.triton import start_server

    folder = tmp_path_factory.mktemp("dali-post")
    shutil.copytree(repo / f"{NAME}_postprocess", folder / f"{NAME}_postprocess")
    with start_server(folder, mode="explicit") as running:
        running.load(f"{NAME}_postprocess")
        yield running


@pytest.mark.triton
def test_served_postprocess_refuses_only_the_request_whose_image_the_dali_step_did_not_decode(postprocess_server: Any) -> None:
    from tritonclient.utils import InferenceServerException

    from repo_builder.triton.client import connect, infer_model

    logits = np.random.default_rng(0).normal(size=(1, 1000)).astype(np.float32)

    def send(height: int, width: int) -> Any:
        client = connect(postprocess_server.grpc_url)
        inputs = {"LOGITS": logits, "IMAGE_SIZE": np.array([[height, width]], dtype=np.int64)}
        try:
            return infer_model(client, f"{NAME}_postprocess", inputs)
        except InferenceServerException as exc:
            return str(exc)

    # Sent together, so the dynamic batcher may put them in one execute(): the refusal must stay the one request's.
    with ThreadPoolExecutor(4) as pool:
        good, over, lying, at_limit, thin, garbage = pool.map(lambda hw: send(*hw), [
            (375, 500), (30000, 30000), (1, LIMIT + 1), (LIMIT // 10000, 10000), (2_000_000, 20), (0, 0)])
    for answer in (good, at_limit):
        assert isinstance(answer, dict) and answer["CLASS_IDS"][0][0] == int(np.argmax(logits)), answer
    assert isinstance(over, str) and (
        f"image 0 of this request: image of 30000x30000 = 900000000 pixels is over this step's limit of {LIMIT} pixels "
        "(MAX_IMAGE_PIXELS; rebuild with --max-image-pixels N to raise it), refused before decoding") in over, over
    assert isinstance(lying, str) and f"image of {LIMIT + 1}x1 = {LIMIT + 1} pixels" in lying, lying
    # Under the limit, but its resize before the crop (shorter side 256) is not: 256 x 25,600,000.
    assert isinstance(thin, str) and "image of 20x2000000 resizes to 256x25600000 = 6553600000 pixels before its crop" in thin
    assert isinstance(garbage, str) and "image 0 of this request: cannot decode image: its first bytes are not those of" in garbage


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


@pytest.mark.triton
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
    assert {"PeekImageShape", "_conditional__Split", "_conditional__Merge"} <= set(pipeline.op_names)
    # IMAGE_SHAPES holds the header's h, w: postprocess refuses an image the DALI step did not decode from them.
    post = (out / "det_postprocess" / "1" / "model.py").read_text(encoding="utf-8")
    assert f"MAX_IMAGE_PIXELS = {DEFAULT_MAX_IMAGE_PIXELS}\n" in post and "refused before decoding" in post
    ensemble = parse_config((out / "det" / "config.pbtxt").read_text(encoding="utf-8"), "config.pbtxt")
    assert "IMGSZ" not in {t.name for t in ensemble.input}
    assert validate_repository(out, ValidateOptions()).ok
    _check_served_detection_postprocess(out, IMGSZ)


def _check_served_detection_postprocess(out: Path, imgsz: int) -> None:
    """det_postprocess alone on the embedded Triton: a request whose IMAGE_SHAPES declare more than the limit fails,
    the same request within it is answered."""
    from tritonclient.utils import InferenceServerException

    from repo_builder.triton import start_server
    from repo_builder.triton.client import connect, infer_model

    config = parse_config((out / "det_postprocess" / "config.pbtxt").read_text(encoding="utf-8"), "config.pbtxt")
    raw = config.input[0]
    folder = out.parent / "served"
    shutil.copytree(out / "det_postprocess", folder / "det_postprocess")
    with start_server(folder, mode="explicit") as server:
        server.load("det_postprocess")
        client = connect(server.grpc_url)

        def send(height: int, width: int) -> dict[str, np.ndarray]:
            return infer_model(client, "det_postprocess", {raw.name: np.zeros([1, *(d if d > 0 else 10 for d in raw.dims)], dtype=np.float32),
                                                           "IMAGE_SHAPES": np.array([[height, width, imgsz, imgsz]], dtype=np.int64)})

        assert send(375, 500)["COUNT"].tolist() == [[0]]
        with pytest.raises(InferenceServerException, match="image of 30000x30000 = 900000000 pixels is over this step's limit"):
            send(30000, 30000)
        with pytest.raises(InferenceServerException, match="image 0 of this request: cannot decode image: its first bytes are not"):
            send(0, 0)  # what the DALI step's IMAGE_SHAPES say of a sample that is not an image
        assert send(20, 4_000_000)["COUNT"].tolist() == [[0]]  # a letterbox never outgrows imgsz: no resize check
        assert send(375, 500)["COUNT"].tolist() == [[0]]
