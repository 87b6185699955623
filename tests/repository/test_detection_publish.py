"""object-detector published to S3 (moto's server) and served from there by the embedded Triton: the same
detections as Ultralytics' predict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.detection_compare import row_problem
from support.detection_fixtures import IMGSZ, detection_images, shared_tiny_detector

from repo_builder.cli.main import main

pytest.importorskip("ultralytics", reason="needs-ultralytics: the detector is built and judged with Ultralytics (detect extra)")
pytestmark = [pytest.mark.triton, pytest.mark.slow]


def test_object_detector_serves_from_s3_when_published(s3_server: str, bucket: str, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
    import cv2
    from ultralytics import YOLO

    from repo_builder.store.urls import parse_store_url
    from repo_builder.triton.server import start_server

    _, onnx_path = shared_tiny_detector(tmp_path_factory.getbasetemp())
    repo = tmp_path / "repo"
    assert main(["build", "object-detector", "--from-onnx", str(onnx_path), "--imgsz", str(IMGSZ), "--runtime", "python",
                 "--name", "det", "--out", str(repo), "-q"]) == 0
    url = f"s3://{bucket}/models"
    assert main(["publish", str(repo), url, "--endpoint-url", s3_server, "--no-gpu", "-q"]) == 0
    name, data = detection_images(1, seed=5)[0]
    expected = YOLO(str(onnx_path), task="detect").predict([cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)],
                                                           imgsz=IMGSZ, verbose=False)[0]
    with start_server(parse_store_url(url, s3_server).triton_url(), mode="explicit", startup_timeout=120) as server:
        server.load("det")
        outputs: Any = server.infer("det", {"IMAGE": np.array([[data]], dtype=np.object_)})
    assert len(expected.boxes) > 0
    assert row_problem(outputs, 0, expected, name) is None
