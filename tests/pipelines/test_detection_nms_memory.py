"""The detection postprocess's NMS under the options a client may send (CONF 0, AGNOSTIC_NMS, a huge MAX_DET):
its peak memory stays linear in the candidates, and its answer is still predict's (issue 40)."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.detection_steps import load_postprocess

pytest.importorskip("ultralytics", reason="needs-ultralytics: compared with Ultralytics' own NMS (detect extra)")

ANCHORS = 8400  # a 640 x 640 one-to-many head
PER_CANDIDATE = 200  # bytes: the candidates' own arrays (boxes, scores, order, kept ...), with room
BLOCK = 16 * 2**20  # bytes: one block x block comparison, with room; an N x N IoU matrix at 8400 is > 250 MB


def worst_raw(anchors: int) -> np.ndarray:
    """Every anchor a candidate at CONF 0, spread over the image so most survive NMS (the most kept boxes)."""
    rng = np.random.default_rng(7)
    raw = rng.uniform(0.0, 1.0, (84, anchors)).astype(np.float32)
    raw[:2] *= 640
    raw[2:4] = raw[2:4] * 60 + 1
    return raw


def peak_bytes(function: Any, *args: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = function(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("agnostic", [True, False], ids=["agnostic", "class-aware"])
def test_detection_nms_memory_stays_linear_in_the_candidates_when_conf_is_zero(tmp_path: Path, agnostic: bool) -> None:
    post = load_postprocess(tmp_path)
    peaks = {}
    for anchors in (ANCHORS // 4, ANCHORS):
        xyxy, score, ids, _ = post.candidates(worst_raw(anchors), 0.0, None)
        assert len(score) == anchors  # CONF 0: every anchor is a candidate
        started = time.perf_counter()
        kept, peaks[anchors] = peak_bytes(post.nms, xyxy, score, ids, 0.7, agnostic, 10**9)
        assert time.perf_counter() - started < 30
        assert len(kept) > anchors // 2  # the worst case: most boxes kept, every block compared with them
        assert peaks[anchors] <= PER_CANDIDATE * anchors + BLOCK, f"{anchors} candidates: peak {peaks[anchors] / 2**20:.1f} MiB"
    # Four times the candidates adds far less than a quadratic algorithm would (16x its first figure).
    assert peaks[ANCHORS] - peaks[ANCHORS // 4] <= PER_CANDIDATE * ANCHORS


def test_detection_nms_equals_predict_when_conf_is_zero_agnostic_and_max_det_huge(tmp_path: Path) -> None:
    import torch
    import torchvision  # noqa: F401  loaded in predict's process, so non_max_suppression uses its nms
    from ultralytics.utils import nms

    post = load_postprocess(tmp_path)
    raw = worst_raw(ANCHORS)
    shape = np.array([640, 640, 640, 640])
    for agnostic in (True, False):
        boxes, scores, ids = post.detect(raw, shape, conf=0.0, iou=0.7, max_det=10**6, classes=None, agnostic=agnostic)
        want = nms.non_max_suppression(torch.from_numpy(raw[None].copy()), conf_thres=0.0, iou_thres=0.7, agnostic=agnostic,
                                       max_det=10**6, max_time_img=1000.0)[0].numpy()
        assert len(scores) == len(want) > ANCHORS // 2
        np.testing.assert_array_equal(ids, want[:, 5].astype(np.int64))
        np.testing.assert_array_equal(scores, want[:, 4])
        np.testing.assert_allclose(boxes, np.clip(want[:, :4], 0, 640), atol=1e-3)
