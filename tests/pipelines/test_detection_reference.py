"""object-detector end to end on the embedded Triton, judged by Ultralytics' own predict (the reference check).

A small yolov8n with random weights and recalibrated batch norms is built here and exported with
Ultralytics' exporter; the repository is built from that ONNX (and from the checkpoint), served, and every
image's detections are compared with ``YOLO(onnx).predict`` on the same image with the same thresholds: the
same count, boxes within 1 px, scores within 1e-3, the same classes.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.detection_compare import row_problem
from support.detection_fixtures import IMGSZ, detection_images, shared_tiny_detector

from repo_builder.cli.main import main

pytest.importorskip("ultralytics", reason="needs-ultralytics: the reference check runs Ultralytics' predict (detect extra)")
pytestmark = [pytest.mark.triton, pytest.mark.slow]
NAME = "det"


@pytest.fixture(scope="module")
def detector(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return shared_tiny_detector(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def served(detector: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    from ultralytics import YOLO

    from repo_builder.triton import start_server

    repo = tmp_path_factory.mktemp("det-repo")
    code = main(["build", "object-detector", "--from-onnx", str(detector[1]), "--imgsz", str(IMGSZ), "--name", NAME,
                 "--runtime", "python", "--out", str(repo), "-q"])
    assert code == 0
    with start_server(repo, mode="explicit") as server:
        server.load(NAME)
        yield server, YOLO(str(detector[1]), task="detect")


def decoded(data: bytes) -> np.ndarray:
    import cv2

    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


def send(server: Any, images: list[bytes], **options: np.ndarray) -> dict[str, np.ndarray]:
    from repo_builder.triton.client import connect, infer_model

    return infer_model(connect(server.grpc_url), NAME, {"IMAGE": np.array([[b] for b in images], dtype=np.object_), **options})


def test_object_detector_matches_predict_when_50_varied_images_sent_at_concurrency_4(served: tuple[Any, Any]) -> None:
    server, yolo = served
    images = detection_images(52)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda item: send(server, [item[1]]), images))
    problems, detections = [], 0
    for (name, data), outputs in zip(images, answers, strict=True):
        result = yolo.predict([decoded(data)], imgsz=IMGSZ, verbose=False)[0]
        detections += len(result.boxes)
        problems.append(row_problem(outputs, 0, result, name))
    assert [p for p in problems if p] == []
    assert detections > 50 * 20  # the random head really exercises NMS (hundreds of candidates per image)


def test_object_detector_matches_predict_when_one_request_mixes_image_sizes(served: tuple[Any, Any]) -> None:
    server, yolo = served
    images = [data for _, data in detection_images(4, seed=1)]  # four different shapes: predict pads to the square
    outputs = send(server, images)
    results = yolo.predict([decoded(d) for d in images], imgsz=IMGSZ, verbose=False)
    assert [row_problem(outputs, row, r, f"row {row}") for row, r in enumerate(results)] == [None] * 4


def test_object_detector_matches_predict_when_one_request_has_same_sized_images(served: tuple[Any, Any]) -> None:
    server, yolo = served
    images = [data for _, data in detection_images(3 * 25, seed=2)][::25]  # SIZES[0] each time: one shape
    outputs = send(server, images)
    results = yolo.predict([decoded(d) for d in images], imgsz=IMGSZ, verbose=False)
    assert sum(len(r.boxes) for r in results) > 0
    assert [row_problem(outputs, row, r, f"row {row}") for row, r in enumerate(results)] == [None] * 3


def test_object_detector_applies_per_request_options_when_optional_inputs_sent(served: tuple[Any, Any]) -> None:
    server, yolo = served
    _, data = detection_images(1, seed=3)[0]
    unfiltered = yolo.predict([decoded(data)], imgsz=IMGSZ, verbose=False)[0]
    classes = sorted({int(c) for c in unfiltered.boxes.cls[:40]})[:3]
    cases = [
        ({"conf": 0.6}, {"CONF": np.array([[0.6]], np.float32)}),
        ({"iou": 0.3, "max_det": 7}, {"IOU": np.array([[0.3]], np.float32), "MAX_DET": np.array([[7]], np.int32)}),
        ({"classes": classes}, {"CLASSES": np.array([[*classes, -1]], np.int32)}),
        ({"agnostic_nms": True}, {"AGNOSTIC_NMS": np.array([[True]])}),
    ]
    for kwargs, inputs in cases:
        expected = yolo.predict([decoded(data)], imgsz=IMGSZ, verbose=False, **kwargs)[0]
        assert 0 < len(expected.boxes) != len(unfiltered.boxes), kwargs  # the option changes the answer
        assert row_problem(send(server, [data], **inputs), 0, expected, str(kwargs)) is None


def test_object_detector_letterboxes_smaller_when_imgsz_sent(served: tuple[Any, Any]) -> None:
    from tritonclient.utils import InferenceServerException

    server, yolo = served
    images = [data for _, data in detection_images(3, seed=6)]
    for data in images:
        expected = yolo.predict([decoded(data)], imgsz=96, verbose=False)[0]
        assert row_problem(send(server, [data], IMGSZ=np.array([[96]], np.int32)), 0, expected, "imgsz 96") is None
    with pytest.raises(InferenceServerException, match="IMGSZ: 100 must be a multiple of 32 between 32 and 160"):
        send(server, images[:1], IMGSZ=np.array([[100]], np.int32))


def test_object_detector_fails_only_that_request_when_bytes_are_not_an_image(served: tuple[Any, Any]) -> None:
    from tritonclient.utils import InferenceServerException

    server, yolo = served
    with pytest.raises(InferenceServerException, match="cannot decode image"):
        send(server, [b"not an image"])
    _, data = detection_images(1)[0]
    result = yolo.predict([decoded(data)], imgsz=IMGSZ, verbose=False)[0]
    assert row_problem(send(server, [data]), 0, result, "after a bad request") is None


def test_object_detector_builds_and_passes_live_validate_when_given_a_checkpoint(detector: tuple[Path, Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code = main(["build", "object-detector", "--model", str(detector[0]), "--imgsz", str(IMGSZ), "--runtime", "python",
                 "--out", str(repo), "--conf", "0.4", "-q"])
    assert code == 0
    post = (repo / "object_detector_postprocess" / "1" / "model.py").read_text()
    assert "CONF = 0.4" in post
    assert main(["validate", str(repo), "--no-gpu", "--live"]) == 0


def test_reference_check_passes_on_60_generated_images_when_repository_built_with_options(detector: tuple[Path, Path], tmp_path: Path) -> None:
    from repo_builder.pipelines.reference import check_reference

    repo = tmp_path / "repo"
    assert main(["build", "object-detector", "--from-onnx", str(detector[1]), "--imgsz", str(IMGSZ), "--conf", "0.3",
                 "--iou", "0.6", "--runtime", "python", "--max-batch-size", "4", "--out", str(repo), "-q"]) == 0
    report = check_reference(repo, minimum_cases=60)
    assert report.failures == () and report.passed
    assert report.cases == 60 and report.figures["detections"] > 60
