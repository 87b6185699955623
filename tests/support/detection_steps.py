"""Render the detection steps' model.py files and import them here (a stand-in for Triton's pb_utils)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

from repo_builder.pipelines.object_detection import DetectionChoices, postprocess_context
from repo_builder.render.context import DEFAULT_MAX_IMAGE_PIXELS
from repo_builder.render.environment import make_environment
from repo_builder.render.render import render_source

DETECTION = {"imgsz": [640, 640], "stride": 32, "rect": True, "num_classes": 80, "input": "images", "output": "output0"}


def _stub_pb_utils() -> None:
    """The steps import triton_python_backend_utils at the top; the functions tested here never call it."""
    sys.modules.setdefault("triton_python_backend_utils", types.ModuleType("triton_python_backend_utils"))


def load_step(folder: Path, template: str, context: dict[str, Any], name: str) -> Any:
    _stub_pb_utils()
    path = folder / f"{name}.py"
    path.write_text(render_source(make_environment(), template, context))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_postprocess(folder: Path, num_classes: int = 80, choices: DetectionChoices | None = None) -> Any:
    context = postprocess_context({**DETECTION, "num_classes": num_classes}, choices or DetectionChoices(), num_classes)
    return load_step(folder, "model/detection_postprocess.py.j2", context, "detection_postprocess")


def load_preprocess(folder: Path, imgsz: int = 640, rect: bool = True) -> Any:
    context = {"model_name": "m_model", "input_name": "IMAGE", "output_name": "images", "shapes_name": "IMAGE_SHAPES", "imgsz_name": "IMGSZ",
               "output_dtype": "float32", "imgsz": [imgsz, imgsz], "stride": 32, "rect": rect, "max_image_pixels": DEFAULT_MAX_IMAGE_PIXELS}
    return load_step(folder, "model/detection_preprocess.py.j2", context, "detection_preprocess")


def synthetic_raw(rng: Any, num_classes: int = 80, anchors: int = 8400, size: int = 640, hot: float = 0.03) -> Any:
    """A head output [4 + classes, anchors]: clustered boxes (so NMS has work), a few hot anchors, ties."""
    import numpy as np

    centers = rng.uniform(0, size, (40, 2))
    pick = rng.integers(0, len(centers), anchors)
    xy = centers[pick] + rng.normal(0, 12, (anchors, 2))
    wh = rng.uniform(8, size / 3, (anchors, 2))
    scores = rng.uniform(0, 0.2, (num_classes, anchors))
    hot_anchors = rng.random(anchors) < hot
    scores[rng.integers(0, num_classes, anchors)[hot_anchors], np.flatnonzero(hot_anchors)] = rng.choice(
        [rng.uniform(0.2, 1.0), 1.0, 0.9], hot_anchors.sum())  # some exact ties
    return np.concatenate([xy.T, wh.T, scores]).astype(np.float32)
