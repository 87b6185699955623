"""The segmentation postprocess's masks against Ultralytics' own process_mask_native (predict with
retina_masks=True), its RLE against a decoder, and its memory bounds (issue 40) against what it allocates, without a
server (fast)."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.detection_steps import load_step

from repo_builder.pipelines.instance_segmentation import MASK_MEMORY, postprocess_context
from repo_builder.pipelines.object_detection import DetectionChoices
from repo_builder.pipelines.segmentation_reference import rle_mask

pytest.importorskip("ultralytics", reason="needs-ultralytics: compared with Ultralytics' own functions (detect extra)")

BLOCK = {"output": "output0", "protos": "output1", "mask_dim": 32, "head": "one-to-many"}


def load_segment_postprocess(folder: Path) -> Any:
    return load_step(folder, "model/segmentation_postprocess.py.j2", postprocess_context(BLOCK, DetectionChoices(), 80), "segment_post")


def full_mask(corner: tuple[int, int], region: np.ndarray, height: int, width: int) -> np.ndarray:
    mask = np.zeros((height, width), dtype=bool)
    mask[corner[0]:corner[0] + region.shape[0], corner[1]:corner[1] + region.shape[1]] = region
    return mask


# (image height, width, prototype height, width): landscape, 4K from 640's prototypes, tiny, thin, square.
SHAPES = [(480, 640, 40, 40), (1080, 1920, 24, 40), (23, 17, 40, 32), (300, 4, 40, 8), (160, 160, 40, 40), (2160, 3840, 160, 160)]


def test_segmentation_masks_equal_process_mask_native_when_image_sizes_vary(tmp_path: Path) -> None:
    import torch
    from ultralytics.utils import ops

    post = load_segment_postprocess(tmp_path)
    rng = np.random.default_rng(0)
    objects = 0
    for height, width, mh, mw in SHAPES:
        protos = rng.normal(0, 1, (32, mh, mw)).astype(np.float32)
        coefficients = rng.normal(0, 1, (10, 32)).astype(np.float32)
        x1, y1 = rng.uniform(0, width, 10), rng.uniform(0, height, 10)
        boxes = np.stack([x1, y1, np.minimum(x1 + rng.uniform(1, width, 10), width),
                          np.minimum(y1 + rng.uniform(1, height, 10), height)], 1).astype(np.float32)
        want = ops.process_mask_native(torch.from_numpy(protos), torch.from_numpy(coefficients), torch.from_numpy(boxes),
                                       (height, width)).numpy() > 0
        plan = post.mask_plan((mh, mw), height, width)
        for number in range(len(boxes)):
            logits = (coefficients[number] @ protos.reshape(32, -1)).reshape(mh, mw)
            corner, region = post.box_mask(logits, boxes[number], plan, height, width)
            got = full_mask(corner, region, height, width)
            # float32 sums in another order may flip a pixel whose logit is ~0: at most 2 per mask.
            assert int((got != want[number]).sum()) <= 2, (height, width, number)
            if region.any():
                objects += 1
                encoded = post.rle(corner, region, height, width)
                assert encoded["size"] == [height, width] and sum(encoded["counts"]) == height * width
                np.testing.assert_array_equal(rle_mask(encoded), got)
    assert objects > 30


def test_segmentation_rle_is_column_major_and_starts_with_zeros(tmp_path: Path) -> None:
    post = load_segment_postprocess(tmp_path)
    region = np.array([[1, 0], [1, 1]], dtype=bool)  # at rows 1-2, columns 0-1 of a 3 x 2 image
    assert post.rle((1, 0), region, 3, 2) == {"size": [3, 2], "counts": [1, 2, 2, 1]}  # columns 0,1,1 then 0,0,1
    whole = np.ones((3, 2), dtype=bool)  # a run across the column boundary stays one run
    assert post.rle((0, 0), whole, 3, 2) == {"size": [3, 2], "counts": [0, 6]}


def checkerboard_protos(mh: int, mw: int) -> np.ndarray:
    """Prototypes whose every cell has the opposite sign of its neighbours: the most runs a mask can have."""
    sign = np.where(np.add.outer(np.arange(mh), np.arange(mw)) % 2 == 0, 1.0, -1.0)
    return np.repeat(sign[None], 32, axis=0).astype(np.float32)


def test_segmentation_object_work_covers_what_one_mask_allocates_when_the_box_is_the_whole_image(tmp_path: Path) -> None:
    post = load_segment_postprocess(tmp_path)
    rng = np.random.default_rng(1)
    for height, width, mh, mw in SHAPES:
        plan = post.mask_plan((mh, mw), height, width)
        for protos, coefficients in ((rng.normal(0, 1, (32, mh, mw)).astype(np.float32), rng.normal(0, 1, 32).astype(np.float32)),
                                     (checkerboard_protos(mh, mw), np.abs(rng.normal(0, 1, 32)).astype(np.float32))):
            tracemalloc.start()
            logits = (coefficients @ protos.reshape(32, -1)).reshape(mh, mw)
            corner, region = post.box_mask(logits, np.array([0, 0, width, height], dtype=np.float32), plan, height, width)
            encoded = post.rle(corner, region, height, width)
            text = json.dumps(encoded, separators=(",", ":"))
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            runs = len(encoded["counts"]) // 2  # runs of 0s and 1s alternate, 0s first
            assert runs <= post.mask_runs(height, width, plan), (height, width, runs)
            assert peak <= post.object_work(height, width, plan, (mh, mw)), (height, width, peak)
            assert len(text) < post.RUN_BYTES * max(runs, 1)
    # The prototype bound matters: a 4K image from 160 x 160 prototypes has 90 prototype rows inside the letterbox.
    plan = post.mask_plan((160, 160), 2160, 3840)
    assert post.mask_runs(2160, 3840, plan) == 3840 * 91 < 3840 * 1080


def test_segmentation_mask_ledger_fails_the_request_whose_masks_pass_the_room_left(tmp_path: Path) -> None:
    post = load_segment_postprocess(tmp_path)
    ledger = post.MaskLedger(room=1000, reserved=5 * 2**20)
    ledger.start()
    ledger.charge("x" * 100)  # 4 copies: 400 bytes
    ledger.finish()
    assert ledger.kept == 400
    ledger.start()
    ledger.charge("x" * 150)  # 1000 bytes in all: still within
    ledger.start()  # that request failed elsewhere: its charge is freed
    with pytest.raises(post.RequestRefused, match="over its memory budget"):
        post.MaskLedger(room=1000, reserved=0).charge("x" * 300)  # alone and over: too large, not busy


def test_segmentation_readme_states_the_step_s_memory_constants_when_rendered(tmp_path: Path) -> None:
    from repo_builder.render.environment import make_environment
    from repo_builder.render.render import render_text

    post = load_segment_postprocess(tmp_path)
    assert MASK_MEMORY == {"mask_copies": post.MASK_COPIES, "run_bytes": post.RUN_BYTES, "nms_bytes": post.NMS_BYTES,
                           "nms_block_bytes": post.NMS_BLOCK_BYTES}
    context = {**postprocess_context(BLOCK, DetectionChoices(), 80), **MASK_MEMORY, "name": "seg_postprocess",
               "step_memory_budget": 3 * 2**20, "step_instances": 2}
    readme = " ".join(render_text(make_environment(), "model/segmentation_README.md.j2", context).split())
    assert "at most MAX_DET (300 as built" in readme and f"{post.RUN_BYTES} bytes per run" in readme
    assert "3 MiB (`STEP_MEMORY_BUDGET`)" in readme and "so at most 6 MiB" in readme and "UNAVAILABLE" in readme
    assert re.search(r"at most 1920 x 91 runs per mask", readme)
    plan = post.mask_plan((160, 160), 1080, 1920)
    assert post.mask_runs(1080, 1920, plan) == 1920 * 91


def test_segmentation_refuses_a_request_whose_boxes_pass_the_mask_pixel_limit_before_any_mask(tmp_path: Path) -> None:
    """MAX_MASK_PIXELS (4 x --max-image-pixels) bounds a request's mask time: its boxes' pixels (ceiled and clipped as
    box_mask clips them) are charged per image after NMS, before that image's masks; over the limit, the request is
    refused, never computed."""
    post = load_step(tmp_path, "model/segmentation_postprocess.py.j2",
                     postprocess_context(BLOCK, DetectionChoices(), 80, max_image_pixels=1000), "segment_post_small")
    assert post.MAX_MASK_PIXELS == 4000
    boxes = np.array([[-5.0, 0.2, 30.0, 20.0], [10.5, 10.5, 90.0, 70.0], [50.0, 50.0, 40.0, 60.0]], dtype=np.float32)
    # Ceiled: (0..30) x (1..20) = 30 x 19; (11..90 clipped to 64) x (11..48 clipped) = 53 x 37; an empty box: 0.
    assert post.box_pixels(boxes, 48, 64) == 30 * 19 + 53 * 37 == 2531
    pixels = post.MaskPixels()
    pixels.charge(2531)
    with pytest.raises(post.RequestRefused, match="cover 5062 pixels, over this step's limit of 4000 mask pixels"):
        pixels.charge(2531)  # the request's second image: refused before its masks
