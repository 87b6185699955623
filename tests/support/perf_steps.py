"""Render one generated step to a model.py on disk (as build writes it), for tests that import it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

from repo_builder.render import context as ctx  # noqa: E402
from repo_builder.render.environment import make_environment  # noqa: E402
from repo_builder.render.render import render_source  # noqa: E402
from repo_builder.spec import Signature, TensorSpec  # noqa: E402

# torchvision's ResNet50_Weights.IMAGENET1K_V2.transforms(): what `export resnet50` records.
RESNET50_PREPROCESS = {"resize": 232, "crop": 224, "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "interpolation": "bilinear"}


def write_image_preprocess(folder: Path, draft_margin: int = 2, resize_with: str = "pillow",
                           preprocess: dict[str, Any] | None = None) -> Path:
    model_input = TensorSpec("pixel_values", "float32", ("batch", 3, 224, 224))
    context = ctx.image_preprocess_context("m_preprocess", "m_model", model_input, preprocess or RESNET50_PREPROCESS,
                                           draft_margin=draft_margin, origin="test", resize_with=resize_with)
    path = folder / f"image_preprocess_{resize_with}.py"
    path.write_text(render_source(make_environment(), "model/image_preprocess.py.j2", context))
    return path


def write_onnx_model(folder: Path) -> Path:
    signature = Signature(inputs=(TensorSpec("x", "float32", ("batch", 4)),), outputs=(TensorSpec("y", "float32", ("batch", 2)),))
    path = folder / "onnx_model.py"
    path.write_text(render_source(make_environment(), "model/onnx_python_model.py.j2", ctx.onnx_python_model_context("m_model", signature)))
    return path


def model_config(parameters: dict[str, str], instances: int) -> dict[str, Any]:
    """The JSON Triton hands initialize() as args["model_config"], the parts model.py reads."""
    return {
        "name": "m_model",
        "instance_group": [{"count": instances, "kind": "KIND_CPU"}],
        "parameters": {key: {"string_value": value} for key, value in parameters.items()},
    }
