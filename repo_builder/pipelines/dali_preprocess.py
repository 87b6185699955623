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

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from repo_builder.errors import MissingDependencyError, UserError
from repo_builder.spec import DEFAULT_MAX_BATCH_SIZE

INPUT = "IMAGE"  # the external source: one encoded image (uint8 bytes) per sample
DALI_FILE = "model.dali"
DEVICES = ("cpu", "gpu")
PAD_VALUE = 114  # Ultralytics' LetterBox fill
# torchvision interpolation -> DALI's interp_type name (looked up lazily on nvidia.dali.types).
INTERPOLATIONS = {"nearest": "INTERP_NN", "bilinear": "INTERP_LINEAR", "bicubic": "INTERP_CUBIC", "lanczos": "INTERP_LANCZOS3"}


@dataclass(frozen=True)
class ClassifierPlan:
    """torchvision's weights transforms: resize the shorter side, center-crop, /255, normalize; CHW or HWC."""

    resize: int
    crop: tuple[int, int]  # (h, w)
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str = "bilinear"
    layout: str = "NCHW"
    output: str = "input"  # the model input the pipeline's one output feeds

    def __post_init__(self) -> None:
        if self.interpolation not in INTERPOLATIONS:
            raise UserError(f"--preprocess dali: interpolation '{self.interpolation}' has no DALI equivalent "
                            f"(known: {', '.join(INTERPOLATIONS)}); use --preprocess python")


@dataclass(frozen=True)
class LetterboxPlan:
    """Ultralytics' LetterBox to a fixed (h, w) (auto=False: the square a static model takes), RGB, /255, CHW."""

    imgsz: tuple[int, int]
    output: str = "images"
    shapes: str = "IMAGE_SHAPES"  # original h, w and the letterboxed input's h, w per image (int64 [4])


def classifier_plan(pre: dict[str, Any]) -> ClassifierPlan:
    """From ``render.context.image_preprocess_context``'s keys (already checked there)."""
    crop_h, crop_w = pre["crop"]
    mean = tuple(float(v) for v in pre["mean"])
    std = tuple(float(v) for v in pre["std"])
    return ClassifierPlan(int(pre["resize"]), (int(crop_h), int(crop_w)), (mean[0], mean[1], mean[2]), (std[0], std[1], std[2]),
                          str(pre["interpolation"]), str(pre["layout"]), str(pre["output_name"]))


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


def _check_device(device: str) -> None:
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")


def _pipeline_args(device: str, max_batch_size: int, num_threads: int) -> dict[str, Any]:
    # device_id None: a CPU-only pipeline; the DALI backend instantiates it with its own device and batch size.
    # One batch in flight: each run() is fed exactly the batch it returns (Triton's requests, the tests' images).
    return {"batch_size": max(1, max_batch_size), "num_threads": num_threads, "device_id": None,
            "prefetch_queue_depth": 1, "exec_async": False, "exec_pipelined": False}


def _decode(fn: Any, types: Any, device: str) -> tuple[Any, Any, Any]:
    """(encoded bytes, decoded RGB image, its (h, w) as float32 from the header)."""
    data = fn.external_source(name=INPUT, dtype=types.UINT8, ndim=1)
    image = fn.decoders.image(data, device="mixed" if device == "gpu" else "cpu", output_type=types.RGB)
    shape = fn.cast(fn.peek_image_shape(data), dtype=types.FLOAT)  # H, W, C
    return data, image, shape


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
    """The classifier's DALI pipeline (not built): decode, resize as torchvision, center crop, normalize, layout."""
    _check_device(device)
    fn, pipeline_def, types = _dali()

    @pipeline_def(**_pipeline_args(device, max_batch_size, num_threads))  # type: ignore[untyped-decorator]
    def classifier() -> Any:
        _, image, shape = _decode(fn, types, device)
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
        return fn.crop_mirror_normalize(
            cropped, device=device, dtype=types.FLOAT, output_layout="CHW" if plan.layout == "NCHW" else "HWC",
            mean=[255.0 * m for m in plan.mean], std=[255.0 * s for s in plan.std],
        )

    with _without_origin_trace(device):
        return classifier()


def define_letterbox(plan: LetterboxPlan, device: str, max_batch_size: int = DEFAULT_MAX_BATCH_SIZE, num_threads: int = 2) -> Any:
    """The detector's DALI pipeline (not built): decode, LetterBox(auto=False) to ``imgsz``, RGB /255 CHW, and
    the shapes the postprocess step rescales boxes with."""
    _check_device(device)
    fn, pipeline_def, types = _dali()

    @pipeline_def(**_pipeline_args(device, max_batch_size, num_threads))  # type: ignore[untyped-decorator]
    def letterbox() -> Any:
        _, image, shape = _decode(fn, types, device)
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
        # As the Python step writes them (and postprocess reads them): original h, w, then the letterboxed input's h, w.
        shapes = fn.cast(fn.stack(height, width, box_h + 0.0 * height, box_w + 0.0 * width), dtype=types.INT64)
        return pixels, shapes

    with _without_origin_trace(device):
        return letterbox()
