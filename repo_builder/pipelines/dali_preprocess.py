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


def _decode(fn: Any, types: Any, device: str, max_pixels: int) -> tuple[Any, Any, Any]:
    """(the image's (h, w, c) from its header as int64, the decoded RGB image, the decoded image's (h, w, c) as
    float32). An image whose header declares more than ``max_pixels`` is not decoded: the decoder gets BLANK_PNG
    instead, whose size the geometry then uses (a refused 1 x 10^9 header must not size a resize either)."""
    data = fn.external_source(name=INPUT, dtype=types.UINT8, ndim=1)
    header = fn.peek_image_shape(data)  # H, W, C (int64), read from the header only
    limit = types.Constant(max_pixels, dtype=types.INT64)  # a plain int constant is int32: a limit past it would not build
    # A DALI conditional: split per sample, merged before the decoder. Each side is checked first, so a product
    # past int64 (two 32-bit sides) cannot wrap under the limit.
    if (header[0] > limit) | (header[1] > limit) | (header[0] * header[1] > limit):
        data = fn.constant(idata=list(BLANK_PNG), dtype=types.UINT8)
    image = fn.decoders.image(data, device="mixed" if device == "gpu" else "cpu", output_type=types.RGB)
    shape = fn.cast(fn.peek_image_shape(data), dtype=types.FLOAT)  # what is decoded: the image, or the blank
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
        header, image, shape = _decode(fn, types, device, plan.max_image_pixels)
        height, width = shape[0], shape[1]
        # torchvision Resize(int): the shorter side becomes `resize`, the longer int(resize * long / short).
        size = float(plan.resize)
        wide = width >= height
        new_h = wide * size + (1 - wide) * _floor(size * height / width)
        new_w = wide * _floor(size * width / height) + (1 - wide) * size
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
        height, width = shape[0], shape[1]
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
