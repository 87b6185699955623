"""The detection steps' numpy code against Ultralytics' own functions, without a server (fast)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.detection_steps import load_postprocess, load_preprocess, synthetic_raw

pytest.importorskip("ultralytics", reason="needs-ultralytics: compared with Ultralytics' own functions (detect extra)")


def reference(raw: np.ndarray, shape: tuple[int, int, int, int], **options: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import torch
    import torchvision  # noqa: F401  loaded in predict's process, so non_max_suppression uses its (stable) nms
    from ultralytics.utils import nms, ops

    kwargs = {"conf_thres": 0.25, "iou_thres": 0.7, "max_det": 300, "classes": None, "agnostic": False, **options}
    pred = nms.non_max_suppression(torch.from_numpy(raw[None].copy()), **kwargs)[0]
    boxes = ops.scale_boxes(shape[2:], pred[:, :4].clone(), shape[:2])
    return boxes.numpy(), pred[:, 4].numpy(), pred[:, 5].numpy().astype(np.int64)


CASES = [
    ({}, {}),
    ({"conf": 0.5}, {"conf_thres": 0.5}),
    ({"iou": 0.3, "max_det": 20}, {"iou_thres": 0.3, "max_det": 20}),
    ({"classes": np.array([1, 5, 7])}, {"classes": [1, 5, 7]}),
    ({"agnostic": True}, {"agnostic": True}),
]


@pytest.mark.parametrize(("ours", "theirs"), CASES, ids=["defaults", "conf", "iou-max-det", "classes", "agnostic"])
def test_detection_postprocess_equals_ultralytics_nms_when_options_vary(tmp_path: Path, ours: dict, theirs: dict) -> None:
    post = load_postprocess(tmp_path)
    rng = np.random.default_rng(0)
    for shape in [(480, 640, 480, 640), (1080, 1920, 384, 640), (3000, 17, 640, 32)]:
        raw = synthetic_raw(rng, size=max(shape[2:]))
        boxes, scores, ids = post.detect(raw, np.array(shape), **ours)
        want_boxes, want_scores, want_ids = reference(raw, shape, **theirs)
        assert len(ids) == len(want_ids) > 0
        np.testing.assert_array_equal(ids, want_ids)
        np.testing.assert_array_equal(scores, want_scores)
        np.testing.assert_allclose(boxes, want_boxes, atol=1e-3)


def test_detection_postprocess_keeps_max_det_best_when_more_survive(tmp_path: Path) -> None:
    post = load_postprocess(tmp_path)
    raw = synthetic_raw(np.random.default_rng(1), hot=0.3)
    _, scores, _ = post.detect(raw, np.array([640, 640, 640, 640]), conf=0.1)
    assert len(scores) == 300
    assert np.all(np.diff(scores) <= 0)


def test_detection_postprocess_returns_nothing_when_no_score_passes(tmp_path: Path) -> None:
    post = load_postprocess(tmp_path)
    raw = synthetic_raw(np.random.default_rng(2))
    boxes, scores, ids = post.detect(raw, np.array([640, 640, 640, 640]), conf=1.0)
    assert boxes.shape == (0, 4) and scores.shape == (0,) and ids.shape == (0,)


@pytest.mark.parametrize("auto", [True, False])
def test_detection_preprocess_equals_ultralytics_preprocess_when_sizes_vary(tmp_path: Path, auto: bool) -> None:
    import cv2
    from ultralytics.data.augment import LetterBox

    pre = load_preprocess(tmp_path, imgsz=320)
    rng = np.random.default_rng(3)
    # 960x540, 1600x900, 2240x2240: odd integer factors (3, 5, 7), which the step reads as a strided view, no resize.
    for width, height in [(640, 480), (1920, 1080), (17, 23), (4, 300), (321, 320), (320, 320), (960, 540), (1600, 900), (2240, 2240)]:
        image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        image = cv2.GaussianBlur(image, (5, 5), 0)
        boxed = LetterBox(320, auto=auto, stride=32)(image=image)
        want = boxed[..., ::-1].transpose(2, 0, 1).astype(np.float32) / np.float32(255)
        plan = pre.letterbox_plan(height, width, auto)
        row = np.empty(want.shape, dtype=np.float32)
        pre.fill(row, image, plan)
        np.testing.assert_array_equal(row, want)
