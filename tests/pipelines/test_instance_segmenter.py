"""build instance-segmenter from yolov8n-seg and yolo26n-seg (random weights from their yaml, recalibrated:
support/detection_fixtures) exported dynamic, served and judged by ``YOLO(onnx).predict(retina_masks=True)``:
the same boxes and classes, every mask IoU >= 0.99 (the reference check). yolov8n-seg has the one-to-many head,
yolo26n-seg is exported with its end-to-end head (nms=False); one repository holds both."""

from __future__ import annotations

import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.detection_fixtures import IMGSZ, build_tiny_checkpoint
from support.step_repository import import_step

from repo_builder.cli.main import main

pytest.importorskip("ultralytics", reason="needs-ultralytics: the models are exported with Ultralytics (detect extra)")

# name -> (yaml, Ultralytics' export options, the head the build must read)
MODELS = {"v8seg": ("yolov8n-seg.yaml", {"dynamic": True}, "one-to-many"),
          "y26seg": ("yolo26n-seg.yaml", {"dynamic": True, "nms": False}, "end-to-end")}
# Random weights find ~250 objects per image at conf 0.5; a few per image keep the check quick (masks take the
# time, in predict as in the step). The check passes the same conf and max_det to predict.
CONF, MAX_DET = 0.5, 12


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from ultralytics import YOLO

    exported = {}
    for name, (yaml, options, _) in MODELS.items():
        checkpoint = build_tiny_checkpoint(tmp_path_factory.mktemp(name), yaml=yaml)
        path = Path(YOLO(str(checkpoint), task="segment").export(format="onnx", imgsz=IMGSZ, verbose=False, **options))
        exported[name] = path.replace(checkpoint.parent / f"{name}.onnx")
    return exported


@pytest.fixture(scope="module")
def repository(exports: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("segmenter-repo")
    for name, onnx_path in exports.items():
        assert main(["build", "instance-segmenter", "--from-onnx", str(onnx_path), "--imgsz", str(IMGSZ), "--conf", str(CONF),
                     "--max-det", str(MAX_DET), "--name", name, "--runtime", "python", "--max-batch-size", "4",
                     "--out", str(repo), "-q"]) == 0, name
    return repo


@pytest.mark.parametrize("name", sorted(MODELS))
def test_instance_segmenter_serves_masks_beside_the_boxes_when_built(repository: Path, name: str) -> None:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    config = text_format.Parse((repository / name / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    outputs = {o.name: model_config_pb2.DataType.Name(o.data_type) for o in config.output}
    assert outputs == {"BOXES": "TYPE_FP32", "SCORES": "TYPE_FP32", "CLASS_IDS": "TYPE_INT64", "CLASS_NAMES": "TYPE_STRING",
                       "COUNT": "TYPE_INT32", "MASKS": "TYPE_STRING"}
    post = (repository / f"{name}_postprocess" / "1" / "model.py").read_text()
    assert f"END_TO_END = {MODELS[name][2] == 'end-to-end'}" in post and "MASK_DIM = 32" in post


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_instance_segmenter_matches_predict_with_retina_masks(repository: Path, name: str) -> None:
    from repo_builder.pipelines.reference import check_reference

    report = check_reference(repository, ensemble=name, minimum_cases=4)
    assert report.failures == () and report.passed, report.failures
    assert report.cases == 4
    assert report.figures["detections"] >= 4  # masks were compared, not only empty images
    assert report.figures["min_mask_iou"] >= 0.99


def test_object_detector_refuses_a_segmentation_export_naming_the_family(exports: dict[str, Path], tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "object-detector", "--from-onnx", str(exports["v8seg"]), "--out", str(tmp_path / "repo")]) == 2
    err = capsys.readouterr().err
    assert "an Ultralytics 'segment' model; build object-detector takes 'detect' models: use build instance-segmenter" in err
    assert "Traceback" not in err and not (tmp_path / "repo").exists()


def test_instance_segmenter_writes_max_mask_pixels_into_its_masks_step_and_refuses_one_below_1(
        exports: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["build", "instance-segmenter", "--from-onnx", str(exports["v8seg"]), "--imgsz", str(IMGSZ), "--runtime", "python",
            "--no-parity", "-q"]
    assert main([*base, "--out", str(tmp_path / "default"), "--max-image-pixels", "1000000"]) == 0
    assert main([*base, "--out", str(tmp_path / "given"), "--max-mask-pixels", "12345"]) == 0
    for folder, limit in (("default", 4_000_000), ("given", 12345)):  # the default: 4 x --max-image-pixels
        step = tmp_path / folder / "instance_segmenter_postprocess" / "1"
        assert f"\nMAX_MASK_PIXELS = {limit}\n" in (step / "model.py").read_text(encoding="utf-8"), folder
        assert f"at most {limit} pixels in all" in " ".join((step / "README.md").read_text(encoding="utf-8").split()), folder
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "zero"), "--max-mask-pixels", "0"]) == 2
    err = capsys.readouterr().err
    assert "--max-mask-pixels must be >= 1, got 0" in err and "Traceback" not in err and not (tmp_path / "zero").exists()


TIGHT = "seg_tight"  # v8seg's postprocess alone, with a budget four requests' masks pass together


def tight_postprocess(repository: Path, folder: Path) -> Path:
    """A copy of v8seg's postprocess step as TIGHT: one instance, its batcher waiting 1 s for one batch."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    target = folder / TIGHT
    shutil.copytree(repository / "v8seg_postprocess", target, ignore=shutil.ignore_patterns("__pycache__"))
    config = text_format.Parse((target / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    config.name = TIGHT
    config.dynamic_batching.max_queue_delay_microseconds = 1_000_000  # one batch on a loaded CI machine too
    del config.dynamic_batching.preferred_batch_size[:]
    for group in config.instance_group:
        group.count = 1
    (target / "config.pbtxt").write_text(text_format.MessageToString(config))
    return target / "1" / "model.py"


def large_masks_request(step: Any) -> dict[str, np.ndarray]:
    """One 1920 x 1080 image (a 160 x 96 letterbox) with four objects over the whole image, one per class (NMS keeps
    them all), whose masks alternate every prototype cell: many runs each."""
    anchors, (mh, mw) = 12 * 20 + 6 * 10 + 3 * 5, (24, 40)
    raw = np.zeros((1, 4 + step.NUM_CLASSES + step.MASK_DIM, anchors), dtype=np.float32)
    for anchor in range(4):
        raw[0, :4, anchor] = [80, 48, 160, 90]  # xywh in the letterbox
        raw[0, 4 + anchor, anchor] = 0.9
        raw[0, 4 + step.NUM_CLASSES:, anchor] = 1.0
    sign = np.where(np.add.outer(np.arange(mh), np.arange(mw)) % 2 == 0, 1.0, -1.0)
    protos = np.repeat(sign[None], step.MASK_DIM, axis=0)[None].astype(np.float32)
    return {step.RAW_NAME: raw, step.PROTOS_NAME: protos, step.SHAPES_NAME: np.array([[1080, 1920, 96, 160]], dtype=np.int64)}


@pytest.mark.triton
@pytest.mark.slow
def test_instance_segmenter_postprocess_answers_busy_when_concurrent_requests_masks_pass_its_budget(
        repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tritonclient.utils import InferenceServerException

    from repo_builder.triton import start_server
    from repo_builder.triton.client import connect, infer_model

    model_py = tight_postprocess(repository, tmp_path / "served")
    step = import_step(model_py, "seg_tight_step")
    request = large_masks_request(step)
    masks = step.segment(request[step.RAW_NAME][0], request[step.PROTOS_NAME][0], request[step.SHAPES_NAME][0], {})[3]
    assert len(masks) == 4
    mask_bytes = step.MASK_COPIES * sum(len(text) for text in masks)
    # The step's own estimate of the request, read through a stand-in for the one pb_utils call it makes.
    monkeypatch.setattr(step.pb_utils, "get_input_tensor_by_name",
                        lambda sent, name: type("Tensor", (), {"as_numpy": lambda self: sent[name]})(), raising=False)
    _, held, work = step.request_cost(request)
    budget = 4 * held + work + 3 * mask_bytes // 2  # four are admitted; their masks fit once, not twice
    source = re.sub(r"^STEP_MEMORY_BUDGET = \d+", f"STEP_MEMORY_BUDGET = {budget}", model_py.read_text(), count=1, flags=re.M)
    model_py.write_text(source)

    def send(_: int) -> dict[str, np.ndarray] | InferenceServerException:
        try:
            return infer_model(connect(server.grpc_url), TIGHT, request)
        except InferenceServerException as exc:
            return exc

    with start_server(tmp_path / "served", mode="explicit") as server:
        server.load(TIGHT)
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(send, range(4)))
        alone = send(0)
    assert isinstance(alone, dict) and alone["MASKS"][0, 0].decode() == "[" + ",".join(masks) + "]"
    answered = [r for r in results if isinstance(r, dict)]
    busy = [r for r in results if not isinstance(r, dict)]
    assert len(answered) == 1 and len(busy) == 3, results
    assert all(np.array_equal(answered[0][key], alone[key]) for key in alone)
    # All four were admitted; the masks refused them: the admitted worst cases and the first request's masks are held.
    working = (4 * held + work + mask_bytes) // 2**20
    for error in busy:
        assert f"MASKS: busy: this step's instance is already working on {working} MiB" in str(error), error
        assert error.status() == "StatusCode.UNAVAILABLE", error.status()
