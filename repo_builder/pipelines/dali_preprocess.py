"""Image preprocessing as a DALI pipeline (``build ... --preprocess dali``), served by Triton's DALI backend.

One definition per task, the device a parameter: ``device="gpu"`` decodes with ``fn.decoders.image(device="mixed")``
(nvJPEG/nvImageCodec) and resizes on the GPU; that is the pipeline serialized into ``model.dali``. ``device="cpu"``
builds the very same graph on the CPU (libjpeg-turbo), which is how its exactness is measured here, where no GPU
is (scripts/bench/dali_preprocess.py, tests/pipelines/test_dali_pipeline.py).

Sizes are computed inside the graph from each image's header (``fn.peek_image_shape``) with the reference's own
integer arithmetic, so the resize and crop land on the same pixels as torchvision (classifiers) or Ultralytics'
LetterBox (detector): a resize to a rounded size with its own scale, never a fractional one.
"""

from __future__ import annotations

import struct
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from repo_builder.errors import MissingDependencyError, UserError
from repo_builder.render.context import DEFAULT_MAX_IMAGE_PIXELS
from repo_builder.spec import DEFAULT_MAX_BATCH_SIZE

INPUT = "IMAGE"  # the external source: one encoded image (uint8 bytes) per sample
DALI_FILE = "model.dali"
DEVICES = ("cpu", "gpu")
PAD_VALUE = 114  # Ultralytics' LetterBox fill
# torchvision interpolation -> DALI's interp_type name (looked up lazily on nvidia.dali.types).
INTERPOLATIONS = {"nearest": "INTERP_NN", "bilinear": "INTERP_LINEAR", "bicubic": "INTERP_CUBIC", "lanczos": "INTERP_LANCZOS3"}
IMAGE_SIZE = "IMAGE_SIZE"  # the classifier's second output: each image's (h, w) from its header (int64 [2])


def _blank_png(side: int = 8) -> bytes:
    """A valid side x side black RGB PNG, built here byte for byte (the same bytes wherever it is built): what the
    decoder gets instead of an image over the pixel limit."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"".join(b"\0" + b"\0" * 3 * side for _ in range(side))  # filter byte 0, then RGB zeros
    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")


BLANK_PNG = _blank_png()


@dataclass(frozen=True)
class ClassifierPlan:
    """torchvision's weights transforms: resize the shorter side, center-crop, /255, normalize; CHW or HWC."""

    resize: int
    crop: tuple[int, int]  # (h, w)
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str = "bilinear"
    layout: str = "NCHW"
    output: str = "input"  # the model input the pipeline's first output feeds
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS  # an image whose header declares more is never decoded

    def __post_init__(self) -> None:
        if self.interpolation not in INTERPOLATIONS:
            raise UserError(f"--preprocess dali: interpolation '{self.interpolation}' has no DALI equivalent "
                            f"(known: {', '.join(INTERPOLATIONS)}); use --preprocess python")
        _check_limit(self.max_image_pixels)


@dataclass(frozen=True)
class LetterboxPlan:
    """Ultralytics' LetterBox to a fixed (h, w) (auto=False: the square a static model takes), RGB, /255, CHW."""

    imgsz: tuple[int, int]
    output: str = "images"
    shapes: str = "IMAGE_SHAPES"  # original h, w and the letterboxed input's h, w per image (int64 [4])
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS  # an image whose header declares more is never decoded

    def __post_init__(self) -> None:
        _check_limit(self.max_image_pixels)


def _check_limit(pixels: int) -> None:
    if isinstance(pixels, bool) or not isinstance(pixels, int) or pixels < 1:
        raise UserError(f"--max-image-pixels must be >= 1, got {pixels!r}")


def classifier_plan(pre: dict[str, Any]) -> ClassifierPlan:
    """From ``render.context.image_preprocess_context``'s keys (already checked there)."""
    crop_h, crop_w = pre["crop"]
    mean = tuple(float(v) for v in pre["mean"])
    std = tuple(float(v) for v in pre["std"])
    return ClassifierPlan(int(pre["resize"]), (int(crop_h), int(crop_w)), (mean[0], mean[1], mean[2]), (std[0], std[1], std[2]),
                          str(pre["interpolation"]), str(pre["layout"]), str(pre["output_name"]),
                          int(pre.get("max_image_pixels", DEFAULT_MAX_IMAGE_PIXELS)))


def _dali() -> tuple[Any, Any, Any]:
    try:
        # DALI is heavy and optional (the `dali` extra): imported only when a pipeline is built.
        from nvidia.dali import fn, pipeline_def, types
    except ImportError:
        raise MissingDependencyError("nvidia-dali-cuda120", "dali", "--preprocess dali") from None
    return fn, pipeline_def, types


@contextmanager
def _without_origin_trace(device: str) -> Iterator[None]:
    """For the served (GPU) flavour: DALI otherwise records each operator's Python call stack, file paths of
    the build machine included, in the serialized pipeline; without it model.dali is the same bytes wherever
    it is built. (``dali_trace.set_tracing`` is DALI-internal: where it is missing, the trace stays.)"""
    try:
        from nvidia.dali._utils import dali_trace  # DALI is optional and heavy: imported where used
    except ImportError:
        yield
        return
    if device != "gpu" or not hasattr(dali_trace, "set_tracing"):
        yield
        return
    before = bool(getattr(dali_trace, "is_tracing_enabled", lambda: True)())
    dali_trace.set_tracing(enabled=False)
    try:
        yield
    finally:
        dali_trace.set_tracing(enabled=before)


@contextmanager
def _autograph_files_removed() -> Iterator[None]:
    """DALI's conditionals (AutoGraph) write each converted function to a file in the temporary folder, removed only
    when the process exits; they are only read while the graph is defined, so they go into a folder removed here."""
    before = tempfile.tempdir
    with tempfile.TemporaryDirectory(prefix="repo-builder-dali-") as folder:
        tempfile.tempdir = folder
        try:
            yield
        finally:
            tempfile.tempdir = before


def _check_device(device: str) -> None:
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")


def _pipeline_args(device: str, max_batch_size: int, num_threads: int) -> dict[str, Any]:
    # device_id None: a CPU-only pipeline; the DALI backend instantiates it with its own device and batch size.
    # One batch in flight: each run() is fed exactly the batch it returns (Triton's requests, the tests' images).
    # enable_conditionals: the `if` that keeps an image over the pixel limit from the decoder (_decode).
    return {"batch_size": max(1, max_batch_size), "num_threads": num_threads, "device_id": None,
            "prefetch_queue_depth": 1, "exec_async": False, "exec_pipelined": False, "enable_conditionals": True}


# The leading bytes of every format DALI's decoders read (nvImageCodec: JPEG, PNG, TIFF, BMP, WebP, PNM, JPEG 2000),
# as (offset, bytes) runs that must all match. A sample matching none is neither peeked nor decoded.
SIGNATURES: tuple[tuple[tuple[int, bytes], ...], ...] = (
    ((0, b"\xff\xd8\xff"),),  # JPEG
    ((0, b"\x89PNG\r\n\x1a\n"),),
    ((0, b"II*\x00"),), ((0, b"MM\x00*"),),  # TIFF, either byte order
    ((0, b"RIFF"), (8, b"WEBP")),
    ((0, b"\x00\x00\x00\x0cjP  \r\n\x87\n"),), ((0, b"\xff\x4f\xff\x51"),),  # JPEG 2000: file, codestream
)
SIGNATURE_BYTES = 16  # every check here reads within them
PNM_KINDS = b"123456"  # P1 to P6
# BMP's two letters alone are common in text: the DIB header's size (little-endian, under 256) must follow at 14.
BMP_HEADER_SIZES = (12, 40, 52, 56, 64, 108, 124)
FORMATS = "JPEG, PNG, TIFF, BMP, WebP, PNM or JPEG 2000"  # what postprocess names when it refuses the rest


def _any_equal(value: Any, choices: bytes | tuple[int, ...]) -> Any:
    found = value == choices[0]
    for choice in choices[1:]:
        found = found | (value == choice)
    return found


def _is_known_format(head: Any) -> Any:
    """Per sample: do its first SIGNATURE_BYTES bytes (zero-padded) start an image DALI decodes? DALI arithmetic
    only: fn.peek_image_shape and the decoders fail the whole batch (and the pipeline) on a sample they cannot read."""
    found = (head[0] == ord("P")) & _any_equal(head[1], PNM_KINDS)
    found = found | ((head[0] == ord("B")) & (head[1] == ord("M")) & _any_equal(head[14], BMP_HEADER_SIZES) & (head[15] == 0))
    for runs in SIGNATURES:
        match = None
        for offset, run in runs:
            for index, byte in enumerate(run):
                equal = head[offset + index] == byte
                match = equal if match is None else match & equal
        found = found | match
    return found


def _resized_sides(height: Any, width: Any, size: int) -> tuple[Any, Any]:
    """torchvision's Resize(int) in int64: the shorter side becomes ``size``, the longer size * long // short, which
    is torchvision's int(size * long / short) while size * long < 2^53 (float64 division is correctly rounded)."""
    dmath = _math()
    wide = width >= height
    # A side under 1 (a refused sample's header) is not divided by: max(..., 1); the refusal does not rely on this.
    new_h = wide * size + (1 - wide) * ((size * height) // dmath.max(width, 1))
    new_w = wide * ((size * width) // dmath.max(height, 1)) + (1 - wide) * size
    return new_h, new_w


def _decode(fn: Any, types: Any, device: str, max_pixels: int, resize: int | None = None) -> tuple[Any, Any, Any]:
    """(the image's (h, w, c) from its header, the decoded RGB image, the decoded image's (h, w, c); int64). The decoder gets BLANK_PNG instead of a sample that is not one of FORMATS (its header is then
    (0, 0, 3)), or whose header declares more than ``max_pixels``, or (``resize``: a classifier's Resize(int))
    whose resize before the crop would; the geometry then uses the blank's size (a refused 1 x 10^9 header must
    not size a resize either), and the postprocess step refuses that request from the header it gets."""
    data = fn.external_source(name=INPUT, dtype=types.UINT8, ndim=1)
    head = fn.slice(data, 0, SIGNATURE_BYTES, axes=[0], out_of_bounds_policy="pad", fill_values=0)
    # DALI conditionals: each `if` splits the batch per sample and merges it after, so fn.peek_image_shape only
    # reads samples that start like an image.
    if _is_known_format(head):
        header = fn.peek_image_shape(data)  # H, W, C (int64), read from the header only
    else:
        header = fn.constant(idata=[0, 0, 3], dtype=types.INT64)
    limit = types.Constant(max_pixels, dtype=types.INT64)  # a plain int constant is int32: a limit past it would not build
    height, width = header[0], header[1]
    # Each side is checked first, so a product past int64 (two 32-bit sides) cannot wrap under the limit.
    refused = (height < 1) | (width < 1) | (height > limit) | (width > limit) | (height * width > limit)
    if resize is not None:  # sides checked first, as above: each new side is then under resize x limit
        new_h, new_w = _resized_sides(height, width, resize)
        refused = refused | (new_h * new_w > limit)
    if refused:
        data = fn.constant(idata=list(BLANK_PNG), dtype=types.UINT8)
    image = fn.decoders.image(data, device="mixed" if device == "gpu" else "cpu", output_type=types.RGB)
    shape = fn.peek_image_shape(data)  # what is decoded (int64): the image, or the blank
    return header, image, shape


def _math() -> Any:
    from nvidia.dali import math as dmath  # DALI is optional and heavy: imported where used, as in _dali()

    return dmath


def _floor(value: Any) -> Any:
    return _math().floor(value)


def _round_half_even(value: Any) -> Any:
    """Python's round() of a non-negative value (torchvision's center_crop, Ultralytics' new size): an exact
    half goes to the even neighbour."""
    nearest = _floor(value + 0.5)
    tie = (value - _floor(value)) == 0.5
    odd = nearest - 2.0 * _floor(nearest * 0.5)  # 1.0 when nearest is odd
    return nearest - tie * odd


def _round_half_away(value: Any) -> Any:
    """Python's round() where ties cannot happen (LetterBox's pads, x.5 -+ 0.1): floor(x + 0.5) on non-negative x."""
    return _floor(value + 0.5)


def define_classifier(plan: ClassifierPlan, device: str, max_batch_size: int = DEFAULT_MAX_BATCH_SIZE, num_threads: int = 2) -> Any:
    """The classifier's DALI pipeline (not built): decode, resize as torchvision, center crop, normalize, layout;
    its second output is each image's (h, w) from the header (IMAGE_SIZE), which postprocess refuses over the limit."""
    _check_device(device)
    fn, pipeline_def, types = _dali()

    @pipeline_def(**_pipeline_args(device, max_batch_size, num_threads))  # type: ignore[untyped-decorator]
    def classifier() -> Any:
        header, image, shape = _decode(fn, types, device, plan.max_image_pixels, resize=plan.resize)
        # torchvision Resize(int), the same int64 arithmetic the pixel limit counts the resize with (_decode).
        sides = _resized_sides(shape[0], shape[1], plan.resize)
        new_h, new_w = (fn.cast(side, dtype=types.FLOAT) for side in sides)
        resized = fn.resize(image, device=device, resize_x=new_w, resize_y=new_h,
                            interp_type=getattr(types, INTERPOLATIONS[plan.interpolation]), antialias=True)
        # torchvision center_crop: int(round((side - crop) / 2.0)), ties to even.
        crop_h, crop_w = float(plan.crop[0]), float(plan.crop[1])
        top = _round_half_even((new_h - crop_h) * 0.5)
        left = _round_half_even((new_w - crop_w) * 0.5)
        anchor = fn.stack(top, left)
        cropped = fn.slice(resized, anchor, fn.stack(crop_h + 0.0 * top, crop_w + 0.0 * left), axis_names="HW",
                           normalized_anchor=False, normalized_shape=False, device=device)
        # ToTensor (/255) then Normalize == (pixel - 255 mean) / (255 std).
        pixels = fn.crop_mirror_normalize(
            cropped, device=device, dtype=types.FLOAT, output_layout="CHW" if plan.layout == "NCHW" else "HWC",
            mean=[255.0 * m for m in plan.mean], std=[255.0 * s for s in plan.std],
        )
        return pixels, fn.stack(header[0], header[1])

    with _without_origin_trace(device), _autograph_files_removed():
        return classifier()


def define_letterbox(plan: LetterboxPlan, device: str, max_batch_size: int = DEFAULT_MAX_BATCH_SIZE, num_threads: int = 2) -> Any:
    """The detector's DALI pipeline (not built): decode, LetterBox(auto=False) to ``imgsz``, RGB /255 CHW, and
    the shapes the postprocess step rescales boxes with (the header's h, w: postprocess refuses over the limit)."""
    _check_device(device)
    fn, pipeline_def, types = _dali()

    @pipeline_def(**_pipeline_args(device, max_batch_size, num_threads))  # type: ignore[untyped-decorator]
    def letterbox() -> Any:
        header, image, shape = _decode(fn, types, device, plan.max_image_pixels)
        height, width = fn.cast(shape[0], dtype=types.FLOAT), fn.cast(shape[1], dtype=types.FLOAT)
        box_h, box_w = float(plan.imgsz[0]), float(plan.imgsz[1])
        # LetterBox.get_params: r = min(h_box / h, w_box / w); new = max(round(side * r), 1).
        dmath = _math()
        ratio = dmath.min(box_h / height, box_w / width)
        new_h = dmath.max(_round_half_even(height * ratio), 1.0)
        new_w = dmath.max(_round_half_even(width * ratio), 1.0)
        # cv2.INTER_LINEAR: no antialiasing when shrinking.
        resized = fn.resize(image, device=device, resize_x=new_w, resize_y=new_h, interp_type=types.INTERP_LINEAR, antialias=False)
        top = _round_half_away((box_h - new_h) * 0.5 - 0.1)
        left = _round_half_away((box_w - new_w) * 0.5 - 0.1)
        padded = fn.slice(resized, fn.stack(-top, -left), fn.stack(box_h + 0.0 * top, box_w + 0.0 * left), axis_names="HW", normalized_anchor=False, normalized_shape=False,
                          out_of_bounds_policy="pad", fill_values=PAD_VALUE, device=device)
        pixels = fn.crop_mirror_normalize(padded, device=device, dtype=types.FLOAT, output_layout="CHW", mean=[0.0] * 3, std=[255.0] * 3)
        # As the Python step writes them (and postprocess reads them): original h, w (the header's, also for a refused
        # image: postprocess refuses it from them), then the letterboxed input's h, w.
        shapes = fn.stack(header[0], header[1], fn.cast(box_h + 0.0 * height, dtype=types.INT64),
                          fn.cast(box_w + 0.0 * width, dtype=types.INT64))
        return pixels, shapes

    with _without_origin_trace(device), _autograph_files_removed():
        return letterbox()
