"""The ``--preprocess dali`` graphs (pipelines/dali_preprocess.py): one definition, the device a parameter.

The CPU flavour is serialized, deserialized with DALI's own ``Pipeline.deserialize`` and run on JPEGs made
here, against torchvision's weights transforms and the detector's Python letterbox step; the GPU flavour (what
model.dali holds) cannot run here, so its operators and devices are read from its bytes.
"""

from __future__ import annotations

import io
import resource
import struct
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from repo_builder.errors import UserError
from repo_builder.pipelines.dali_preprocess import (
    BLANK_PNG,
    ClassifierPlan,
    LetterboxPlan,
    define_classifier,
    define_letterbox,
)
from repo_builder.validate.analysis.dali_pipeline import read_dali_pipeline

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "bench"))
pytest.importorskip("nvidia.dali", reason="needs the dali extra (nvidia-dali-cuda120)")

RESNET_V2 = ClassifierPlan(232, (224, 224), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
# Odd margins on both axes: the crop anchor falls on x.5 and torchvision's round() goes to the even side.
ODD_PLAN = ClassifierPlan(233, (224, 224), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def _run(pipe: object, images: list[bytes]) -> list[np.ndarray]:
    from dali_preprocess import run_pipeline

    return run_pipeline(pipe, images)


def _torchvision(plan: ClassifierPlan, images: list[bytes]) -> np.ndarray:
    import torch
    from PIL import Image
    from torchvision.transforms import v2

    transforms = v2.Compose([v2.PILToTensor(), v2.Resize(plan.resize, antialias=True), v2.CenterCrop(plan.crop),
                             v2.ToDtype(torch.float32, scale=True), v2.Normalize(plan.mean, plan.std)])
    return np.stack([transforms(Image.open(io.BytesIO(d)).convert("RGB")).numpy() for d in images])


def _photos(width: int, height: int, count: int) -> list[bytes]:
    from photos import photo

    return [photo(width, height, seed) for seed in range(count)]


@pytest.mark.parametrize("plan", [RESNET_V2, ODD_PLAN])
@pytest.mark.parametrize("size", [(500, 375), (375, 500), (641, 479)])
def test_dali_classifier_matches_torchvision_within_limits_when_run_on_cpu(plan: ClassifierPlan, size: tuple[int, int]) -> None:
    images = _photos(*size, count=2)
    pipe = define_classifier(plan, "cpu", max_batch_size=2)
    pipe.build()
    ours, sizes = _run(pipe, images)
    diff = np.abs(ours - _torchvision(plan, images))
    assert sizes.tolist() == [[size[1], size[0]]] * 2  # the header's h, w: what postprocess checks the limit with
    assert ours.shape == (2, 3, 224, 224)
    assert diff.mean() <= 0.02 and diff.max() <= 0.25, (diff.mean(), diff.max())


def test_dali_classifier_cpu_serialized_pipeline_deserializes_and_gives_the_same_output() -> None:
    from nvidia.dali import Pipeline

    images = _photos(500, 375, 2)
    direct = define_classifier(RESNET_V2, "cpu", max_batch_size=2)
    data = bytes(direct.serialize())
    direct.build()
    restored = Pipeline.deserialize(serialized_pipeline=data, device_id=None, prefetch_queue_depth=1,
                                    exec_async=False, exec_pipelined=False)
    restored.build()
    np.testing.assert_array_equal(_run(direct, images)[0], _run(restored, images)[0])
    ops = read_dali_pipeline(data).op_names
    assert {"ExternalSource", "decoders__Image", "PeekImageShape", "Resize", "Slice", "CropMirrorNormalize"} <= set(ops)


def test_dali_classifier_gpu_flavour_decodes_mixed_and_runs_image_ops_on_gpu() -> None:
    data = bytes(define_classifier(RESNET_V2, "gpu", max_batch_size=8).serialize())
    # The served file is the same bytes wherever it is built: no call stacks with the build machine's paths.
    assert data == bytes(define_classifier(RESNET_V2, "gpu", max_batch_size=8).serialize())
    assert str(ROOT).encode() not in data and b"dali_preprocess.py" not in data
    pipeline = read_dali_pipeline(data)
    devices = {op.name: op.devices for op in pipeline.ops}
    assert devices["decoders__Image"] == ("gpu",)  # fn.decoders.image(device="mixed"): GPU output
    assert devices["Resize"] == devices["Slice"] == devices["CropMirrorNormalize"] == ("gpu",)
    # The pixels on the GPU; IMAGE_SIZE (the header's h, w, for postprocess's pixel-limit check) on the CPU.
    assert pipeline.inputs == ("IMAGE",) and pipeline.output_devices == ("gpu", "cpu") and pipeline.batch_size == 8


def test_dali_letterbox_matches_the_python_step_when_run_on_cpu() -> None:
    from dali_preprocess import _detector_step

    step = _detector_step()
    # 1001x1280: the resized width is exactly 500.5, where Python's round() (LetterBox's) goes to 500.
    images = _photos(500, 375, 2) + _photos(375, 500, 1) + _photos(1001, 1280, 1)
    pipe = define_letterbox(LetterboxPlan((640, 640)), "cpu", max_batch_size=4)
    pipe.build()
    ours, shapes = _run(pipe, images)
    model = step.TritonPythonModel()
    model.initialize({})
    try:
        reference, ref_shapes = model.request_tensors([step.decode(data) for data in images])
    finally:
        model.finalize()
    diff = np.abs(ours - reference)
    assert diff.mean() <= 0.02 and diff.max() <= 0.25, (diff.mean(), diff.max())
    # What postprocessing rescales boxes with: original h, w and the letterboxed input's h, w.
    assert shapes.tolist() == ref_shapes.tolist() == [[375, 500, 640, 640]] * 2 + [[500, 375, 640, 640], [1280, 1001, 640, 640]]


def test_dali_classifier_plan_refused_when_interpolation_has_no_dali_equivalent() -> None:
    with pytest.raises(UserError, match="interpolation 'hamming' has no DALI equivalent"):
        ClassifierPlan(256, (224, 224), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), interpolation="hamming")


# --- the pixel limit: an image whose header declares too many pixels never reaches the decoder --------------------

BOMB_SIDE = 30000  # 900 megapixels: decoding one takes 2.7 GB and seconds


def _lying_jpeg(side: int) -> bytes:
    """A 64 x 48 JPEG whose frame header claims side x side."""
    data = bytearray(_photos(64, 48, 1)[0])
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", side, side)
    return bytes(data)


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.fixture(scope="module")
def bombs() -> list[bytes]:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.step_repository import zeros_png

    found = [zeros_png(BOMB_SIDE, BOMB_SIDE), _lying_jpeg(BOMB_SIDE)]
    assert all(len(bomb) < 2**20 for bomb in found)  # small files that declare 900 megapixels
    return found


@pytest.mark.parametrize("define, plan", [(define_classifier, RESNET_V2), (define_letterbox, LetterboxPlan((640, 640)))],
                         ids=["classifier", "letterbox"])
def test_dali_pipeline_never_decodes_an_image_over_the_pixel_limit_and_answers_its_neighbours(
    define: object, plan: object, bombs: list[bytes]
) -> None:
    from nvidia.dali import Pipeline

    good = _photos(500, 375, 2)
    pipe = define(plan, "cpu", max_batch_size=4)  # type: ignore[operator]
    data = bytes(pipe.serialize())
    pipe.build()
    alone = _run(pipe, good)
    before, start = _peak_rss(), time.perf_counter()
    mixed = _run(pipe, [good[0], *bombs, good[1]])
    seconds, grown = time.perf_counter() - start, _peak_rss() - before
    assert seconds < 1.0 and grown < 300 * 2**20, (seconds, grown)  # decoding either bomb: seconds and 2.7 GB
    np.testing.assert_array_equal(mixed[0][[0, 3]], alone[0])  # the neighbours' exact answer
    # The refusal signal postprocess reads: the header's h, w (the detector's IMAGE_SHAPES starts with them).
    assert [row[:2] for row in mixed[1].tolist()] == [[375, 500], [BOMB_SIDE, BOMB_SIDE], [BOMB_SIDE, BOMB_SIDE], [375, 500]]
    blank = _run(pipe, [BLANK_PNG])[0][0]  # what the model gets instead: the blank's pixels, never the bomb's
    np.testing.assert_array_equal(mixed[0][1], blank)
    np.testing.assert_array_equal(mixed[0][2], blank)
    # model.dali holds this graph, conditionals included: it deserializes and runs the same.
    restored = Pipeline.deserialize(serialized_pipeline=data, device_id=None, prefetch_queue_depth=1, exec_async=False,
                                    exec_pipelined=False)
    restored.build()
    for ours, theirs in zip(mixed, _run(restored, [good[0], *bombs, good[1]]), strict=True):
        np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("limit, decoded", [(500 * 375, True), (500 * 375 - 1, False)], ids=["at-limit", "one-over"])
def test_dali_classifier_uses_the_build_limit_and_decodes_an_image_exactly_at_it(limit: int, decoded: bool) -> None:
    from dataclasses import replace

    images = _photos(500, 375, 1)
    pipe = define_classifier(replace(RESNET_V2, max_image_pixels=limit), "cpu", max_batch_size=2)
    pipe.build()
    pixels, sizes = _run(pipe, [*images, BLANK_PNG])
    assert sizes.tolist() == [[375, 500], [8, 8]]
    assert np.array_equal(pixels[0], pixels[1]) is not decoded  # over the limit: the blank's pixels


def test_dali_gpu_flavour_checks_the_header_before_the_mixed_decoder() -> None:
    pipeline = read_dali_pipeline(bytes(define_letterbox(LetterboxPlan((640, 640)), "gpu", max_batch_size=8).serialize()))
    ops = pipeline.op_names
    assert {"_conditional__Split", "_conditional__Merge", "Constant"} <= set(ops)
    # The split on the header's size comes before the decoder; the decoder reads what the merge gives it.
    assert ops.index("PeekImageShape") < ops.index("_conditional__Split") < ops.index("_conditional__Merge") < ops.index("decoders__Image")
    assert pipeline.output_devices == ("gpu", "cpu")


def test_dali_plans_refuse_a_pixel_limit_below_one_and_build_one_past_int32() -> None:
    with pytest.raises(UserError, match="--max-image-pixels must be >= 1"):
        LetterboxPlan((640, 640), max_image_pixels=0)
    pipe = define_letterbox(LetterboxPlan((640, 640), max_image_pixels=2**40), "cpu", max_batch_size=1)
    pipe.build()  # DALI's plain int constants are int32: the limit is an int64 constant
    assert _run(pipe, _photos(500, 375, 1))[1].tolist() == [[375, 500, 640, 640]]
