"""Hostile requests to served pipelines (issue 40): decompression bombs, a lying header, 16-bit grey, 10 MB texts.

The folder's shared repository of Python steps (support.step_repository, built once per session) holds an image
classifier (random weights), the tiny detector, the tiny text classifier and the tiny token classifier (refuse and
truncate); one embedded Triton serves them all. Each case asserts the error or the answer, that it came fast,
that every model is still READY, that no process of the server grew to what decoding a bomb takes, and that the
next good request gets exactly the answer it got before.
"""

from __future__ import annotations

import io
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.step_repository import server_peak_rss, zeros_png

from repo_builder.render.context import DEFAULT_MAX_IMAGE_PIXELS

pytest.importorskip("ultralytics", reason="needs-ultralytics: the tiny detector is built with Ultralytics (detect extra)")
pytestmark = [pytest.mark.triton, pytest.mark.slow]
IMAGE_MODELS = ("cls", "det")
TEXT_MODELS = ("txt", "ner", "ner_truncate")
FAST = 3.0  # seconds: decoding a bomb takes ~17 s and gigabytes, a refusal milliseconds
# Peak RSS of any one server process: decoding a 30000 x 30000 image takes 0.9-2.7 GB, the steps ~0.5 GB without.
PEAK_RSS = 1.5 * 2**30
BOMB_SIDE = 30000


@pytest.fixture(scope="module")
def server(step_repository: Path) -> Iterator[Any]:
    from repo_builder.triton import start_server

    with start_server(step_repository, mode="explicit") as running:
        for name in IMAGE_MODELS + TEXT_MODELS:
            running.load(name)
        yield running


@pytest.fixture(scope="module")
def baseline(server: Any) -> dict[str, dict[str, np.ndarray]]:
    """Each model's answer to a good request, before any hostile one."""
    return {name: send(server, name, good_request(name)) for name in IMAGE_MODELS + TEXT_MODELS}


def send(server: Any, name: str, items: list[bytes]) -> dict[str, np.ndarray]:
    from repo_builder.triton.client import connect, infer_model

    key = "TEXT" if name in TEXT_MODELS else "IMAGE"
    return infer_model(connect(server.grpc_url), name, {key: np.array([[item] for item in items], dtype=np.object_)})


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
    if name in TEXT_MODELS:
        return [b"George Washington went to Washington and met Ada Lovelace in London"]
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


def refused(server: Any, name: str, items: list[bytes]) -> tuple[str, float]:
    from tritonclient.utils import InferenceServerException

    start = time.perf_counter()
    with pytest.raises(InferenceServerException) as caught:
        send(server, name, items)
    return str(caught.value), time.perf_counter() - start


def assert_unharmed(server: Any, baseline: dict[str, dict[str, np.ndarray]]) -> None:
    """Every model READY, no process grown to a bomb's size, every good request answered exactly as before."""
    states = {m.name: m.state for m in server.models() if m.name in baseline}
    assert states == dict.fromkeys(baseline, "READY")
    assert server_peak_rss(server) < PEAK_RSS
    for name, expected in baseline.items():
        answer = send(server, name, good_request(name))
        assert answer.keys() == expected.keys()
        assert all(np.array_equal(answer[key], expected[key]) for key in expected), name


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


@pytest.mark.parametrize("model", IMAGE_MODELS)
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


def test_text_step_answers_a_10mb_text_as_its_truncated_start_when_sent_to_the_classifier(server: Any,
                                                                                          baseline: dict[str, Any]) -> None:
    start = time.perf_counter()
    answer = send(server, "txt", [LONG_TEXT])
    assert time.perf_counter() - start < FAST
    expected = send(server, "txt", [LONG_TEXT[:2400]])  # well over the tiny model's 128 tokens: the same tokens kept
    assert all(np.array_equal(answer[key], expected[key]) for key in expected)
    message, seconds = refused(server, "txt", [b"fine", b" " * 10_000_000 + b"hidden"])
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
