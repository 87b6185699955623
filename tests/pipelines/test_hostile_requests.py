"""Hostile requests to served pipelines (issue 40): decompression bombs, a lying header, odd image formats, 10 MB and
invalid texts, bad detection options, concurrent large images.

The folder's shared repository of Python steps (support.step_repository, built once per session) holds an image
classifier (random weights), the tiny detector, the tiny instance segmenter, RapidOCR's text recognizer, the tiny text
classifier, the tiny sentence-transformer embedder and the tiny token classifier (refuse and truncate); one embedded
Triton serves them all. Each case asserts the error or the answer, that it came fast, that every model is still
READY, that no process of the server grew (since the case began) to what decoding a bomb takes, and that the next
good request gets exactly the answer it got before.
"""

from __future__ import annotations

import io
import struct
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.step_repository import reset_server_peaks, server_peak_rss, zeros_png

from repo_builder.render.context import DEFAULT_MAX_IMAGE_PIXELS

pytest.importorskip("ultralytics", reason="needs-ultralytics: the tiny detector is built with Ultralytics (detect extra)")
pytest.importorskip("rapidocr_onnxruntime", reason="needs-rapidocr: the text recognizer's models ship with it (test extra)")
pytestmark = [pytest.mark.triton, pytest.mark.slow]
IMAGE_MODELS = ("cls", "det", "seg", "ocr")
TEXT_MODELS = ("txt", "ner", "ner_truncate", "emb")
OCR_CALLED = ("ocr_model", "ocr_cls_model", "ocr_rec_model")  # called by the OCR step (BLS), not by the ensemble
FAST = 3.0  # seconds: decoding a bomb takes ~17 s and gigabytes, a refusal milliseconds
# Peak RSS of any one server process during a case: decoding a 30000 x 30000 image takes 0.9-2.7 GB, the steps ~0.5 GB
# without.
PEAK_RSS = 1.5 * 2**30
BOMB_SIDE = 30000


@pytest.fixture(scope="module")
def server(step_repository: Path) -> Iterator[Any]:
    from repo_builder.triton import start_server

    with start_server(step_repository, mode="explicit") as running:
        for name in OCR_CALLED + IMAGE_MODELS + TEXT_MODELS:
            running.load(name)
        yield running


@pytest.fixture(scope="module")
def baseline(server: Any) -> dict[str, dict[str, np.ndarray]]:
    """Each model's answer to a good request, before any hostile one."""
    return {name: send(server, name, good_request(name)) for name in IMAGE_MODELS + TEXT_MODELS}


@pytest.fixture(autouse=True)
def fresh_peaks(server: Any) -> None:
    """Each case's RSS bound is on what the server's processes reach during that case."""
    reset_server_peaks(server)


def send(server: Any, name: str, items: list[bytes], options: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    from repo_builder.triton.client import connect, infer_model

    key = "TEXT" if name in TEXT_MODELS else "IMAGE"
    inputs = {key: np.array([[item] for item in items], dtype=np.object_), **(options or {})}
    return infer_model(connect(server.grpc_url), name, inputs, timeout=300)


def encoded(array: np.ndarray, fmt: str = "PNG") -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, fmt)
    return buffer.getvalue()


def photo(height: int = 300, width: int = 400) -> np.ndarray:
    """A smooth colour picture: gradients, so every model has something to see."""
    rows, cols = np.mgrid[0:height, 0:width]
    return np.stack([rows * 255 // height, cols * 255 // width, (rows + cols) * 255 // (height + width)], axis=-1).astype(np.uint8)


def good_request(name: str) -> list[bytes]:
    from repo_builder.pipelines import ocr_reference

    if name in TEXT_MODELS:
        return [b"George Washington went to Washington and met Ada Lovelace in London"]
    if name == "ocr":  # a picture with text, so the good answer has lines
        return [ocr_reference.render_case(ocr_reference.CYCLE.index("narrow"))]
    return [encoded(photo(), "JPEG")]


def lying_jpeg(side: int) -> bytes:
    """A 16 x 16 JPEG whose frame header claims side x side."""
    data = bytearray(encoded(photo(16, 16), "JPEG"))
    sof = data.index(b"\xff\xc0")
    data[sof + 5:sof + 9] = struct.pack(">HH", side, side)
    return bytes(data)


def grey16() -> tuple[bytes, bytes]:
    """A 16-bit grey PNG (Pillow mode I;16) spanning 0..65535, and the same picture in 8 bits (value >> 8)."""
    values = (np.mgrid[0:240, 0:320].sum(axis=0) * 65535 // (239 + 319)).astype(np.uint16)
    return encoded(values), encoded((values >> 8).astype(np.uint8))


def refused(server: Any, name: str, items: list[bytes], options: dict[str, np.ndarray] | None = None) -> tuple[str, float]:
    from tritonclient.utils import InferenceServerException

    start = time.perf_counter()
    with pytest.raises(InferenceServerException) as caught:
        send(server, name, items, options)
    return str(caught.value), time.perf_counter() - start


def assert_same(answer: dict[str, np.ndarray], expected: dict[str, np.ndarray], what: str = "") -> None:
    assert answer.keys() == expected.keys(), what
    assert all(np.array_equal(answer[key], expected[key]) for key in expected), what


def assert_unharmed(server: Any, baseline: dict[str, dict[str, np.ndarray]]) -> None:
    """Every model READY, no process grown to a bomb's size, every good request answered exactly as before."""
    states = {m.name: m.state for m in server.models() if m.name in baseline}
    assert states == dict.fromkeys(baseline, "READY")
    assert server_peak_rss(server) < PEAK_RSS
    for name, expected in baseline.items():
        assert_same(send(server, name, good_request(name)), expected, name)


@pytest.mark.parametrize("model", IMAGE_MODELS)
@pytest.mark.parametrize("case", ["zeros-png", "lying-jpeg"])
def test_image_step_refuses_before_decoding_when_header_declares_30000x30000(server: Any, baseline: dict[str, Any], model: str,
                                                                              case: str) -> None:
    bomb = zeros_png(BOMB_SIDE, BOMB_SIDE) if case == "zeros-png" else lying_jpeg(BOMB_SIDE)
    assert len(bomb) < 2**20  # a small file that declares 900 megapixels
    message, seconds = refused(server, model, [good_request(model)[0], bomb])
    assert "image 1 of this request" in message and f"limit of {DEFAULT_MAX_IMAGE_PIXELS} pixels" in message, message
    assert "--max-image-pixels" in message and "refused before decoding" in message
    assert seconds < FAST
    assert_unharmed(server, baseline)


@pytest.mark.parametrize("model", ("cls", "det", "seg"))  # OCR: RapidOCR's own 16-bit arithmetic (odd formats below)
def test_image_step_answers_16bit_grey_as_its_high_byte_when_sent_a_16bit_png(server: Any, baseline: dict[str, Any], model: str) -> None:
    wide, narrow = grey16()
    start = time.perf_counter()
    answer = send(server, model, [wide])
    assert time.perf_counter() - start < FAST
    expected = send(server, model, [narrow])  # the stated rule: value >> 8, never clipped to white
    assert all(np.array_equal(answer[key], expected[key]) for key in expected)
    white = send(server, model, [encoded(np.full((240, 320), 255, dtype=np.uint8))])
    assert any(not np.array_equal(answer[key], white[key]) for key in white)
    assert_unharmed(server, baseline)


LONG_TEXT = ("Ada Lovelace met George Washington in London . " * 220_000).encode()  # about 10 MB of words


@pytest.mark.parametrize("model", ["txt", "emb"])
def test_text_step_answers_a_10mb_text_as_its_truncated_start_when_sent_to_the_classifier_or_the_embedder(
        server: Any, baseline: dict[str, Any], model: str) -> None:
    start = time.perf_counter()
    answer = send(server, model, [LONG_TEXT])
    assert time.perf_counter() - start < FAST
    expected = send(server, model, [LONG_TEXT[:2400]])  # well over the tiny models' 128 and 48 tokens: the same tokens kept
    assert_same(answer, expected)
    message, seconds = refused(server, model, [b"fine", b" " * 10_000_000 + b"hidden"])
    assert "TEXT: text 1 of this request" in message and "tokens' worth of whole words" in message, message
    assert seconds < FAST
    assert_unharmed(server, baseline)


def test_token_step_refuses_a_10mb_text_in_milliseconds_when_long_texts_are_refused(server: Any, baseline: dict[str, Any]) -> None:
    assert len(LONG_TEXT) > 10_000_000
    message, seconds = refused(server, "ner", [b"a short one", LONG_TEXT])
    assert "text 1 of this request is longer than 128 tokens" in message, message
    assert seconds < FAST
    assert_unharmed(server, baseline)


def test_token_step_truncates_a_10mb_text_as_the_whole_text_when_long_texts_are_truncated(server: Any,
                                                                                             baseline: dict[str, Any]) -> None:
    start = time.perf_counter()
    answer = send(server, "ner_truncate", [LONG_TEXT])
    assert time.perf_counter() - start < FAST
    # 400 words are well over 128 tokens: truncation keeps the same tokens of both texts, so the same entities.
    expected = send(server, "ner_truncate", [LONG_TEXT[:2400]])
    assert all(np.array_equal(answer[key], expected[key]) for key in expected)
    assert_unharmed(server, baseline)


def test_token_step_refuses_a_text_of_10mb_whitespace_naming_it_when_no_prefix_settles_the_tokens(server: Any,
                                                                                                    baseline: dict[str, Any]) -> None:
    message, seconds = refused(server, "ner_truncate", [b"fine", b" " * 10_000_000 + b"hidden"])
    assert "text 1 of this request" in message and "do not hold 128 tokens' worth of whole words" in message, message
    assert seconds < FAST
    assert_unharmed(server, baseline)


@pytest.mark.parametrize("size", [(20, 4_000_000), (20, 900_000)], ids=["20x4000000", "20x900000"])
def test_image_step_resizing_with_torch_refuses_a_thin_image_whose_resize_is_over_the_limit_and_pillow_answers_it(
    tmp_path: Path, size: tuple[int, int]
) -> None:
    """--resize-with torch resizes the whole image before its crop (20 x 4,000,000: 232 x 46,400,000 = 10.8 G pixels,
    32 GB): refused from the header. The Pillow step resamples only the crop's source region, so it answers it at the
    decoded image's cost, which the pixel limit bounds (docs/security.md)."""
    from support.perf_steps import write_image_preprocess
    from support.step_repository import import_step

    thin = zeros_png(*size)
    steps = {which: import_step(write_image_preprocess(tmp_path, resize_with=which), f"thin_{which}") for which in ("torch", "pillow")}
    model = steps["torch"].TritonPythonModel()
    model.initialize({})
    start = time.perf_counter()
    with pytest.raises(ValueError) as caught:
        model.pixels(thin)
    new_long = 232 * size[1] // size[0]
    assert str(caught.value) == (f"image of {size[0]}x{size[1]} resizes to 232x{new_long} = {232 * new_long} pixels before its crop, "
                                 f"over this step's limit of {DEFAULT_MAX_IMAGE_PIXELS} pixels (MAX_IMAGE_PIXELS; rebuild with "
                                 "--max-image-pixels N to raise it), refused before decoding")
    assert time.perf_counter() - start < 0.1  # the header only
    model.finalize()
    if size[1] < 1_000_000:  # the Pillow step answers it (decoding 18 megapixels, not resizing 2.4 G pixels)
        pillow = steps["pillow"].TritonPythonModel()
        pillow.initialize({})
        assert pillow.pixels(thin).shape == (224, 224, 3)
        pillow.finalize()


INVALID_UTF8 = b"Ada \xff\xfe Lovelace \xc3( met \xed\xa0\x80 George in London \xe2\x82"  # stray, overlong, surrogate, cut


@pytest.mark.parametrize("model", TEXT_MODELS)
def test_text_step_answers_invalid_utf8_as_its_replacement_characters_when_sent_broken_bytes(server: Any, baseline: dict[str, Any],
                                                                                              model: str) -> None:
    start = time.perf_counter()
    answer = send(server, model, [INVALID_UTF8])
    assert time.perf_counter() - start < FAST
    replaced = INVALID_UTF8.decode("utf-8", errors="replace")
    assert replaced.count("\ufffd") >= 5
    assert_same(answer, send(server, model, [replaced.encode()]))  # the stated rule: U+FFFD for each bad sequence
    assert_unharmed(server, baseline)


@pytest.mark.parametrize("model", ["txt", "ner", "emb"])
def test_text_step_refuses_eight_10mb_texts_in_one_request_naming_the_byte_cap(server: Any, baseline: dict[str, Any],
                                                                               model: str) -> None:
    """The request that took the token step to 21 GB and its stub to the OOM killer (issue 40): 8 x 10 MB, 82 MB."""
    message, seconds = refused(server, model, [LONG_TEXT] * 8)
    assert f"TEXT: this request's inputs are {8 * len(LONG_TEXT)} bytes, over this step's limit of 67108864 bytes" in message, message
    assert "--max-request-bytes" in message
    assert seconds < FAST
    assert_unharmed(server, baseline)


def odd_formats() -> dict[str, bytes]:
    """The same picture in the formats a client may send: CMYK JPEG, palette PNG, RGBA PNG, an animated GIF and a
    two-page TIFF (the first frame or page counts), 16-bit RGB PNG."""
    from PIL import Image

    picture = Image.fromarray(photo(240, 320))
    negative = Image.fromarray(255 - photo(240, 320))

    def save(image: Any, fmt: str, **options: Any) -> bytes:
        buffer = io.BytesIO()
        image.save(buffer, fmt, **options)
        return buffer.getvalue()

    wide = (photo(240, 320).astype(np.uint16) * 257).byteswap()  # big-endian 16-bit samples, as PNG stores them
    rgb16 = png_with_pixels(240, 320, 16, 2, wide.tobytes(), rows_of=320 * 6)
    return {"cmyk-jpeg": save(picture.convert("CMYK"), "JPEG", quality=95),
            "palette-png": save(picture.convert("P"), "PNG"),
            "rgba-png": save(picture.convert("RGBA"), "PNG"),
            "animated-gif": save(picture.convert("P"), "GIF", save_all=True, append_images=[negative.convert("P")]),
            "two-page-tiff": save(picture, "TIFF", save_all=True, append_images=[negative]),
            "rgb16-png": rgb16}


def png_with_pixels(height: int, width: int, depth: int, colour: int, samples: bytes, rows_of: int) -> bytes:
    """A PNG of ``samples`` (rows of ``rows_of`` bytes, filter 0), for a bit depth Pillow does not write (16-bit RGB)."""
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    raw = b"".join(b"\0" + samples[row * rows_of:(row + 1) * rows_of] for row in range(height))
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def stated_rule(model: str, data: bytes) -> bytes | None:
    """``data`` as the 8-bit RGB PNG its step's stated rule makes of it (docs/security.md); None: the step refuses it.
    Pillow steps: convert("RGB") (first frame or page). OpenCV steps: imdecode(IMREAD_COLOR), as predict loads.
    The OCR step: RapidOCR's own loader (LoadImage), which its reference check compares with, after a palette image
    is made RGB (or RGBA with transparency): LoadImage reads palette indices as grey."""
    import cv2
    from PIL import Image

    if model == "cls":
        return encoded(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    if model in ("det", "seg"):
        bgr = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    else:
        from rapidocr_onnxruntime.utils.load_image import LoadImage

        image = Image.open(io.BytesIO(data))
        if image.mode in ("P", "PA"):
            buffer = io.BytesIO()
            image.convert("RGBA" if image.mode == "PA" or "transparency" in image.info else "RGB").save(buffer, "PNG")
            data = buffer.getvalue()
        bgr = LoadImage()(data)
    if bgr is None:
        return None
    assert bgr.dtype == np.uint8 and bgr.shape == (240, 320, 3), (model, bgr.dtype, bgr.shape)
    return encoded(np.ascontiguousarray(bgr[..., ::-1]))


@pytest.mark.parametrize("model", IMAGE_MODELS)
def test_image_step_answers_odd_formats_as_its_stated_colour_rule_or_refuses_them_naming_the_image(
        server: Any, baseline: dict[str, Any], model: str) -> None:
    answered = []
    for name, data in odd_formats().items():
        plain = stated_rule(model, data)
        if plain is None:  # OpenCV reads no GIF: refused alone, with its reason
            message, seconds = refused(server, model, [good_request(model)[0], data])
            assert "IMAGE: image 1 of this request" in message and "not an image OpenCV can decode" in message, (name, message)
            assert seconds < FAST, name
            continue
        start = time.perf_counter()
        answer = send(server, model, [data])
        assert time.perf_counter() - start < FAST, name
        assert_same(answer, send(server, model, [plain]), name)
        answered.append(name)
    assert len(answered) >= 5, answered  # only OpenCV's GIF is refused
    assert_unharmed(server, baseline)


BAD_OPTIONS = {  # option input -> (a value, what the refusal says)
    "CONF": [(np.nan, "CONF must be between 0 and 1, got nan"), (np.inf, "CONF must be between 0 and 1, got inf"),
             (-0.5, "CONF must be between 0 and 1, got -0.5")],
    "IOU": [(1.5, "IOU must be between 0 and 1, got 1.5")],
    "MAX_DET": [(-1, "MAX_DET must be >= 0, got -1")],
    "IMGSZ": [(0, "IMGSZ: 0 must be a multiple of 32"), (2**31 - 1, "IMGSZ: 2147483647 must be a multiple of 32")],
}
OPTION_TYPES = {"CONF": np.float32, "IOU": np.float32, "MAX_DET": np.int32, "IMGSZ": np.int32}


@pytest.mark.parametrize("model", ["det", "seg"])
def test_detection_step_refuses_nan_inf_and_negative_options_and_answers_conf_0_with_a_huge_max_det(
        server: Any, baseline: dict[str, Any], model: str) -> None:
    image = good_request(model)
    for option, cases in BAD_OPTIONS.items():
        for value, rule in cases:
            message, seconds = refused(server, model, image, {option: np.array([[value]], dtype=OPTION_TYPES[option])})
            assert rule in message, (option, value, message)
            assert seconds < FAST, (option, value)
    # Every anchor a candidate and no cap: answered (NMS linear in the candidates: its memory is the RSS bound), at
    # least the build's own objects class-aware, fewer class-agnostic; MAX_DET 0: none.
    assert int(send(server, model, image, {"MAX_DET": np.array([[0]], np.int32)})["COUNT"].item()) == 0
    counts = {}
    for agnostic in (False, True):
        widest = {"CONF": np.array([[0.0]], np.float32), "MAX_DET": np.array([[2**31 - 1]], np.int32),
                  "AGNOSTIC_NMS": np.array([[agnostic]])}
        start = time.perf_counter()
        counts[agnostic] = int(send(server, model, image, widest)["COUNT"].item())
        assert time.perf_counter() - start < 10 * FAST, agnostic
    assert counts[False] >= int(baseline[model]["COUNT"].item()) and counts[False] > counts[True] > 0, counts
    assert_unharmed(server, baseline)


LARGE_SIDE = 9000  # 81 megapixels: under the default pixel limit (89.5 MP), so accepted; 0.7-1.9 GiB of work each
BUDGET_RSS = 2 * 2**30 + 768 * 2**20  # one process: its --step-memory-mib budget (2 GiB) + what a loaded step holds


def test_segmenter_refuses_boxes_covering_more_than_its_mask_pixel_limit_before_computing_their_masks(
        server: Any, baseline: dict[str, Any]) -> None:
    """A random-weight segmenter finds ~240 objects on an 81-megapixel black PNG (80 KB); their masks at the image's
    resolution took ~75 s. Their boxes' pixels are counted after NMS and refused over MAX_MASK_PIXELS, in seconds."""
    message, seconds = refused(server, "seg", [zeros_png(LARGE_SIDE, LARGE_SIDE)])
    assert "MASKS: this request's objects' boxes cover" in message and "mask pixels per request" in message, message
    assert seconds < 15, seconds  # decoding the 81 megapixels and NMS; no mask
    assert_unharmed(server, baseline)


# Not the segmenter: its preprocessing is the detector's step, and its masks are bounded by the test above.
@pytest.mark.parametrize("model", ["cls", "det", "ocr"])
def test_image_step_answers_or_says_busy_to_four_concurrent_81_megapixel_images_within_its_budget(
        server: Any, baseline: dict[str, Any], model: str) -> None:
    """Four concurrent 169-megapixel PNGs took the detector to 5.4 GB (issue 40); four accepted 81-megapixel ones
    now each get the answer they get alone or busy (UNAVAILABLE), and no process passes the budget."""
    large = zeros_png(LARGE_SIDE, LARGE_SIDE)
    alone = send(server, model, [large])
    reset_server_peaks(server)
    start = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: outcome(server, model, [large]), range(4)))
    seconds = time.perf_counter() - start
    answered = [r for r in results if isinstance(r, dict)]
    assert answered, results
    for result in results:
        if isinstance(result, dict):
            assert_same(result, alone)
        else:
            assert "IMAGE: busy: this step's instance is already working on" in str(result), result
            assert result.status() == "StatusCode.UNAVAILABLE", result.status()
    assert seconds < 60, seconds
    assert server_peak_rss(server) < BUDGET_RSS
    states = {m.name: m.state for m in server.models() if m.name in baseline}
    assert states == dict.fromkeys(baseline, "READY")
    for name, expected in baseline.items():
        assert_same(send(server, name, good_request(name)), expected, name)


def outcome(server: Any, name: str, items: list[bytes]) -> dict[str, np.ndarray] | Any:
    from tritonclient.utils import InferenceServerException

    try:
        return send(server, name, items)
    except InferenceServerException as exc:
        return exc
