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
import tempfile
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


def test_dali_gpu_flavour_checks_the_signature_and_header_before_the_mixed_decoder() -> None:
    pipeline = read_dali_pipeline(bytes(define_letterbox(LetterboxPlan((640, 640)), "gpu", max_batch_size=8).serialize()))
    ops = pipeline.op_names
    assert {"_conditional__Split", "_conditional__Merge", "Constant"} <= set(ops)
    splits = [i for i, op in enumerate(ops) if op == "_conditional__Split"]
    merges = [i for i, op in enumerate(ops) if op == "_conditional__Merge"]
    peeks = [i for i, op in enumerate(ops) if op == "PeekImageShape"]
    # The first bytes split the batch before the header is peeked (in one branch); the header's size splits it again
    # before the decoder, which reads what the last merge gives it.
    assert ops.index("Slice") < splits[0] < peeks[0] < merges[0] < splits[-1] < merges[-1] < ops.index("decoders__Image")
    assert pipeline.output_devices == ("gpu", "cpu")


def test_dali_plans_refuse_a_pixel_limit_below_one_and_build_one_past_int32() -> None:
    with pytest.raises(UserError, match="--max-image-pixels must be >= 1"):
        LetterboxPlan((640, 640), max_image_pixels=0)
    pipe = define_letterbox(LetterboxPlan((640, 640), max_image_pixels=2**40), "cpu", max_batch_size=1)
    pipe.build()  # DALI's plain int constants are int32: the limit is an int64 constant
    assert _run(pipe, _photos(500, 375, 1))[1].tolist() == [[375, 500, 640, 640]]


# --- a resize past the limit (classifier) and samples that are not images: never decoded, refused by postprocess ---

def _thin_png(width: int, height: int) -> bytes:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.step_repository import zeros_png

    return zeros_png(width, height)


def _postprocess_refusals(plan: ClassifierPlan, headers: list[list[int]]) -> list[str | None]:
    """The classifier's postprocess step (as a DALI build renders it) judging IMAGE_SIZE rows, one request each."""
    from types import SimpleNamespace

    from support.step_repository import import_step

    from repo_builder.pipelines.dali_preprocess import FORMATS
    from repo_builder.render import context as ctx
    from repo_builder.render.environment import make_environment
    from repo_builder.render.render import render_source
    from repo_builder.spec import TensorSpec

    context = {**ctx.postprocess_context("m_postprocess", "m_model", TensorSpec("LOGITS", "float32", ("batch", 10)), 5, 10),
               "image_size_name": "IMAGE_SIZE", "max_image_pixels": plan.max_image_pixels, "resize": plan.resize, "formats": FORMATS}
    with tempfile.TemporaryDirectory(prefix="dali-post-") as folder:
        (Path(folder) / "model.py").write_text(render_source(make_environment(), "model/classification_postprocess.py.j2", context))
        step = import_step(Path(folder) / "model.py", f"dali_post_{plan.max_image_pixels}")
    step.pb_utils = SimpleNamespace(get_input_tensor_by_name=lambda request, name: SimpleNamespace(as_numpy=lambda: request))
    return [step.refusal(np.array([row], dtype=np.int64)) for row in headers]


# 80 megapixels, under the default limit; resized (shorter side 232): 232 x 46,400,000. (DALI's CPU decoder, libpng,
# cannot decode it: over libpng's 1,000,000 rows, so the batch failed before.) 20 x 900,000 decodes, and its resize
# is 232 x 10,440,000: 7 GB. 10 x 10,000,000: 232 x its height is past int32 (the graph counts in int64).
THIN = 20, 4_000_000


@pytest.mark.parametrize("size, limit", [(THIN, RESNET_V2.max_image_pixels), ((20, 900_000), RESNET_V2.max_image_pixels),
                                         ((10, 10_000_000), 10**9)],
                         ids=["20x4000000-default-limit", "20x900000-default-limit", "10x10000000-resize-past-int32"])
def test_dali_classifier_never_decodes_an_image_whose_resize_is_over_the_limit_and_answers_its_neighbours(
    size: tuple[int, int], limit: int
) -> None:
    from dataclasses import replace

    plan = replace(RESNET_V2, max_image_pixels=limit)
    good, thin = _photos(500, 375, 2), _thin_png(*size)
    pipe = define_classifier(plan, "cpu", max_batch_size=3)
    pipe.build()
    alone = _run(pipe, [good[0], BLANK_PNG, good[1]])[0]
    before, start = _peak_rss(), time.perf_counter()
    pixels, sizes = _run(pipe, [good[0], thin, good[1]])
    seconds, grown = time.perf_counter() - start, _peak_rss() - before
    # Decoding it: 240-300 MB and about a second; resizing it before the crop: 10^10 pixels.
    assert seconds < 1.0 and grown < 150 * 2**20, (seconds, grown)
    np.testing.assert_array_equal(pixels, alone)  # the blank in its place, the neighbours exact
    assert sizes.tolist() == [[375, 500], [size[1], size[0]], [375, 500]]
    new_long = plan.resize * size[1] // size[0]
    (refusal,) = _postprocess_refusals(plan, [[size[1], size[0]]])
    assert refusal == (f"IMAGE: image 0 of this request: image of {size[0]}x{size[1]} resizes to {plan.resize}x{new_long} = "
                       f"{plan.resize * new_long} pixels before its crop, over this step's limit of {limit} pixels "
                       "(MAX_IMAGE_PIXELS; rebuild with --max-image-pixels N to raise it), refused before decoding")


def test_dali_classifier_and_its_postprocess_refuse_the_same_images_at_the_resize_limit() -> None:
    from dataclasses import replace

    # 100 x 40 resizes (shorter side 232) to 580 x 232 = 134,560 pixels: more than it has (4,000).
    limit = 580 * 232
    sizes = [(100, 40), (101, 40), (40, 100), (40, 101), (300, 300), (367, 366), (400, 400)]
    images = [encoded for width, height in sizes for encoded in [_png(width, height)]]
    plan = replace(RESNET_V2, max_image_pixels=limit)
    pipe = define_classifier(plan, "cpu", max_batch_size=len(images) + 1)
    pipe.build()
    pixels, headers = _run(pipe, [*images, BLANK_PNG])
    blanked = [bool(np.array_equal(row, pixels[-1])) for row in pixels[:-1]]
    # 101 x 40: 585 x 232 = 135,720; 367 x 366: header 134,322 and 232 x 232 after; 400 x 400: its header is over.
    assert blanked == [False, True, False, True, False, False, True]
    assert [refusal is not None for refusal in _postprocess_refusals(plan, headers[:-1].tolist())] == blanked


def _png(width: int, height: int, fmt: str = "PNG") -> bytes:
    from PIL import Image

    rows, cols = np.mgrid[0:height, 0:width]
    buffer = io.BytesIO()
    Image.fromarray(np.stack([rows * 7 % 256, cols * 5 % 256, (rows + cols) % 256], axis=-1).astype(np.uint8)).save(buffer, fmt)
    return buffer.getvalue()


NOT_IMAGES = [b"hello, this is not an image", b"", b"BM but a text", b"P7 332\n", _png(40, 30, "GIF")]


@pytest.mark.parametrize("define, plan", [(define_classifier, RESNET_V2), (define_letterbox, LetterboxPlan((640, 640)))],
                         ids=["classifier", "letterbox"])
def test_dali_pipeline_answers_a_batch_mixing_images_and_samples_that_are_not_images(define: object, plan: object) -> None:
    good = _photos(500, 375, 2)
    pipe = define(plan, "cpu", max_batch_size=len(NOT_IMAGES) + 2)  # type: ignore[operator]
    pipe.build()
    alone = _run(pipe, [good[0], *[BLANK_PNG] * len(NOT_IMAGES), good[1]])
    pixels, shapes = _run(pipe, [good[0], *NOT_IMAGES, good[1]])
    np.testing.assert_array_equal(pixels, alone[0])  # the blank for each, the neighbours exact
    # (0, 0): what postprocess refuses as "cannot decode image" (GIF: DALI's decoders do not read it).
    assert [row[:2] for row in shapes.tolist()] == [[375, 500], *[[0, 0]] * len(NOT_IMAGES), [375, 500]]
    if define is define_classifier:
        assert _postprocess_refusals(RESNET_V2, [[0, 0]]) == [
            "IMAGE: image 0 of this request: cannot decode image: its first bytes are not those of a JPEG, PNG, TIFF, BMP, "
            "WebP, PNM or JPEG 2000 file, or its header declares no pixels"]


def test_dali_classifier_decodes_every_format_its_signature_check_lets_through() -> None:
    formats = ["PNG", "JPEG", "BMP", "TIFF", "WEBP", "PPM", "JPEG2000"]
    pipe = define_classifier(RESNET_V2, "cpu", max_batch_size=len(formats) + 1)
    pipe.build()
    pixels, sizes = _run(pipe, [*[_png(240, 230, fmt) for fmt in formats], BLANK_PNG])
    assert sizes.tolist() == [[230, 240]] * len(formats) + [[8, 8]]
    assert not any(np.array_equal(row, pixels[-1]) for row in pixels[:-1])


def test_dali_pipeline_still_fails_its_batch_on_a_file_with_an_image_signature_and_a_broken_header() -> None:
    """The limit docs/security.md states: the signature check cannot parse a header (no loops over bytes in DALI's
    graph), so fn.peek_image_shape fails the whole batch on such a file, as the decoders do on a broken body."""
    pipe = define_classifier(RESNET_V2, "cpu", max_batch_size=2)
    pipe.build()
    with pytest.raises(RuntimeError, match="peek_image_shape"):
        _run(pipe, [_photos(500, 375, 1)[0], b"\xff\xd8\xff\xe0 then no JPEG marker"])


def test_dali_decoder_converts_16bit_png_to_8bit_by_rounding_v_over_257_not_by_the_high_byte() -> None:
    """The DALI steps' colour rule for 16-bit images, measured (docs/security.md): DALI's decoder gives
    round(v / 257), where the Python steps keep the high byte (v >> 8), as Pillow and OpenCV do; the two differ by
    at most one level. Neither clips: grey stays grey, not white. An identity plan (16 x 16, no crop, mean 0,
    std 1) shows the decoded pixels."""
    import cv2

    rng = np.random.default_rng(0)
    grey = rng.integers(0, 65536, (16, 16), dtype=np.uint16)
    colour = rng.integers(0, 65536, (16, 16, 3), dtype=np.uint16)
    images = [cv2.imencode(".png", grey)[1].tobytes(), cv2.imencode(".png", colour[..., ::-1])[1].tobytes()]
    plan = ClassifierPlan(16, (16, 16), (0.0, 0.0, 0.0), (1.0, 1.0, 1.0), layout="NHWC")
    decoded = np.rint(_run(define_classifier(plan, "cpu", max_batch_size=2), images)[0] * 255.0)  # the pixels output
    for pixels, sixteen in zip(decoded, [np.repeat(grey[..., None], 3, axis=2), colour], strict=True):
        assert np.array_equal(pixels, np.round(sixteen / 257.0))
        high = (sixteen >> 8).astype(np.float64)
        assert not np.array_equal(pixels, high) and np.abs(pixels - high).max() == 1.0
