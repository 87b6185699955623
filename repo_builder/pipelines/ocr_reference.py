"""The text-recognizer's reference check and bench reference: ``RapidOCR()`` (rapidocr-onnxruntime 1.4.4,
Apache-2.0, the ``test`` extra) with the same models and settings, in process, on images rendered here with
DejaVu Sans: several lines, rotated by 180 and by a few degrees, light on dark, no text, 97 to 4000 px wide.

Exact means: the same number of lines, the same strings, boxes within 1 px and scores within 1e-3.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.export.text_recognizer import rapidocr_models
from repo_builder.pipelines.family import FamilyReference, InProcess, ReferenceReport, ReferenceRun

IMAGE_INPUT = "IMAGE"  # the ensemble's input and output (text_recognition renders them)
LINES_OUTPUT = "LINES"
FONT_FOLDER = Path("/usr/share/fonts/truetype/dejavu")  # Debian's fonts-dejavu
FONT = "DejaVuSans.ttf"
BOX_TOLERANCE = 1.0
SCORE_TOLERANCE = 1e-3
SERVED_CONCURRENCY = 2  # requests in flight during the check (the step has two instances by default)
WORDS = ("invoice", "total", "Triton", "model", "server", "batch", "OCR", "2026", "repository", "label", "price",
         "42.50", "delivery", "Berlin", "order", "number", "text", "line", "image", "quick", "brown", "fox", "data")
# The kinds cycle every 14 images. RapidOCR scales the detector input's shorter side up to 736 px, so a square
# image of any size under 736 px costs one 736 x 736 detector run, the least there is; a low, wide one costs up to
# 4x that (its letterbox stops at 4:1). Most images are small and square (the check must stay quick: 42 images
# in CI on 2 cores); "wide" (4000, 2600, 1800 px) and "large" (shorter side over 736: not upscaled) are the big ones.
CYCLE = ("lines", "flipped", "tilted", "inverse", "empty", "narrow", "wide",
         "lines", "flipped", "tilted", "inverse", "lines", "narrow", "large")
KINDS = tuple(dict.fromkeys(CYCLE))  # each kind once, in the order of its first image
WIDE_WIDTHS = (4000, 2600, 1800)


def kind(index: int) -> str:
    return CYCLE[index % len(CYCLE)]


def _font(size: int) -> Any:
    from PIL import ImageFont

    path = FONT_FOLDER / FONT
    return ImageFont.truetype(str(path), size) if path.is_file() else ImageFont.load_default(size)


def _phrase(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def _filled(rng: random.Random, size: int, width: int) -> str:
    """Words until the line is about ``width`` pixels long."""
    font, words = _font(size), [rng.choice(WORDS)]
    while font.getlength(" ".join(words)) < width:
        words.append(rng.choice(WORDS))
    return " ".join(words[:-1] if len(words) > 1 else words)


def _text_image(lines: Sequence[str], size: int, width: int | None = None, dark_on_light: bool = True, square: bool = True,
                min_height: int = 0) -> Any:
    """The lines at ``size`` px; ``width`` None: as wide as the longest line; ``square``: padded to a square."""
    from PIL import Image, ImageDraw

    font = _font(size)
    if width is None:
        width = int(max(font.getlength(line) for line in lines)) + size
    height = max(int(size * 1.8) * len(lines) + size, min_height)
    if square:
        width = height = max(width, height)
    image = Image.new("RGB", (width, height), (255, 255, 255) if dark_on_light else (20, 24, 32))
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        draw.text((size // 2, size // 2 + row * int(size * 1.8)), line, font=font,
                  fill=(0, 0, 0) if dark_on_light else (235, 235, 235))
    return image


def render_case(index: int) -> bytes:
    """Image ``index`` as PNG bytes: its kind is ``kind(index)``, its words, sizes and angles vary with ``index``."""
    from PIL import Image

    rng = random.Random(index)
    name = kind(index)
    if name == "empty":
        side = 160 + 20 * (index % 5)
        image = Image.new("RGB", (side, side), (250, 250, 250))
    elif name == "narrow":  # 97 px wide, one or two short words
        image = _text_image(rng.sample(("OCR", "42", "fox", "text", "line"), rng.randint(1, 2)), 22, 97, square=False, min_height=97)
    elif name == "wide":  # long lines, 4000 px wide and less: the detector's input is 2944 x 736
        width = WIDE_WIDTHS[index // len(CYCLE) % len(WIDE_WIDTHS)]
        size, rows = width // 60, 2 if width == WIDE_WIDTHS[0] else 1
        image = _text_image([_filled(rng, size, width - 3 * size) for _ in range(rows)], size, width, square=False)
    elif name == "large":  # shorter side over 736 px: the detector sees it at its own size (rounded to 32)
        image = _text_image([_phrase(rng, rng.randint(2, 3)) for _ in range(rng.randint(4, 6))], rng.choice((40, 44, 48)), 1000,
                            square=False, min_height=760)
    else:
        image = _text_image([_phrase(rng, rng.randint(1, 3)) for _ in range(rng.randint(2, 4))], rng.choice((20, 24, 28)),
                            dark_on_light=name != "inverse")
        if name == "flipped":
            image = image.rotate(180)
        elif name == "tilted":
            image = image.rotate(rng.choice((-4, -3, 3, 4)), expand=True, fillcolor=(255, 255, 255), resample=Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def images(count: int) -> list[bytes]:
    return [render_case(i) for i in range(count)]


def reference_engine(settings: Mapping[str, Any], threads: int = -1) -> Any:
    """``RapidOCR()`` with the models (and settings) the repository was built from."""
    try:
        from rapidocr_onnxruntime import RapidOCR  # type: ignore[import-untyped]
    except ImportError:
        raise UserError("the text-recognizer reference is RapidOCR: pip install 'rapidocr-onnxruntime==1.4.4'") from None
    ocr = dict(settings.get("ocr") or {})
    kwargs: dict[str, Any] = {"det_model_path": settings.get("det_model"), "rec_model_path": settings.get("rec_model"),
                              "intra_op_num_threads": threads, "text_score": ocr.get("text_score", 0.5)}
    if settings.get("cls_model"):
        kwargs["cls_model_path"] = settings["cls_model"]
    else:
        kwargs["use_cls"] = False
    if settings.get("dict"):
        kwargs["rec_keys_path"] = settings["dict"]
    if "max_boxes" in ocr:
        kwargs["det_max_candidates"] = ocr["max_boxes"]
    return RapidOCR(**{k: v for k, v in kwargs.items() if v is not None})


def reference_lines(engine: Any, data: bytes) -> list[dict[str, Any]]:
    result, _ = engine(data)
    return [{"text": text, "score": float(score), "box": box} for box, text, score in (result or [])]


def compare(index: int, expected: Sequence[Mapping[str, Any]], served: Sequence[Mapping[str, Any]]) -> tuple[list[str], float, float]:
    """Failures (one line each), the largest box and score differences of one image."""
    if len(expected) != len(served):
        return [f"image {index}: {len(served)} lines served, RapidOCR reads {len(expected)}: "
                f"{[line['text'] for line in served]} vs {[line['text'] for line in expected]}"], 0.0, 0.0
    failures, box_diff, score_diff = [], 0.0, 0.0
    for row, (want, got) in enumerate(zip(expected, served, strict=True)):
        if want["text"] != got["text"]:
            failures.append(f"image {index} line {row}: served {got['text']!r}, RapidOCR reads {want['text']!r}")
        box = max(abs(float(a) - float(b)) for p, q in zip(want["box"], got["box"], strict=True) for a, b in zip(p, q, strict=True))
        box_diff, score_diff = max(box_diff, box), max(score_diff, abs(float(want["score"]) - float(got["score"])))
    return failures, box_diff, score_diff


def request(batch: Sequence[bytes]) -> dict[str, Any]:
    import numpy as np

    return {IMAGE_INPUT: np.array(list(batch), dtype=np.object_).reshape(-1, 1)}


def served_lines(outputs: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    rows = outputs[LINES_OUTPUT].reshape(-1)
    return [json.loads(row.decode("utf-8") if isinstance(row, bytes) else str(row)) for row in rows]


def check(run: ReferenceRun) -> ReferenceReport:
    from concurrent.futures import ThreadPoolExecutor

    engine = reference_engine(run.settings)
    cases = images(run.minimum_cases)
    batches = [cases[start:start + run.max_batch_size] for start in range(0, len(cases), run.max_batch_size)]
    # The server reads the batches (SERVED_CONCURRENCY in flight) while this process runs RapidOCR on the same
    # images: the check costs about the sum of both sides' compute, not the sum of their latencies.
    with ThreadPoolExecutor(SERVED_CONCURRENCY) as pool:
        pending = [pool.submit(run.infer, request(batch)) for batch in batches]
        expected = [reference_lines(engine, data) for data in cases]
        served = [lines for future in pending for lines in served_lines(future.result())]
    failures: list[str] = []
    box_diff = score_diff = 0.0
    lines = 0
    for index, (want, got) in enumerate(zip(expected, served, strict=True)):
        lines += len(want)
        found, box, score = compare(index, want, got)
        failures.extend(found)
        if box > BOX_TOLERANCE or score > SCORE_TOLERANCE:
            failures.append(f"image {index}: boxes differ by {box:.3g} px, scores by {score:.3g}")
        box_diff, score_diff = max(box_diff, box), max(score_diff, score)
    passed = not failures and len(served) == len(cases) and box_diff <= BOX_TOLERANCE and score_diff <= SCORE_TOLERANCE
    return ReferenceReport(
        family="text-recognizer", cases=len(cases), passed=passed,
        figures={"images": float(len(cases)), "lines": float(lines), "max_box_diff_px": box_diff, "max_score_diff": score_diff},
        bounds={"max_box_diff_px": f"<= {BOX_TOLERANCE}", "max_score_diff": f"<= {SCORE_TOLERANCE}",
                "lines": "the same count and strings as RapidOCR()"},
        failures=tuple(failures[:5]))


def load(checkpoint: Path, threads: int) -> InProcess:
    """bench --reference: RapidOCR() with the wheel's classifier and recognizer beside ``checkpoint`` (the detector)."""
    models = rapidocr_models()
    engine = reference_engine({"det_model": str(checkpoint), "cls_model": str(models.cls), "rec_model": str(models.rec)}, threads)
    return InProcess(run=lambda batch: [reference_lines(engine, data) for data in batch], threads=threads)


REFERENCE = FamilyReference(check=check, items=images, request=request, load=load, unit="images")
