"""Accuracy of a generated image preprocessing step against torchvision's own weights transforms.

The step's model.py is imported as the Python backend would (its `triton_python_backend_utils` is the one
nvidia-pytriton ships) and its decode + resize + crop + normalise run on the same JPEGs torchvision reads.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from photos import SIZES, photos


def backend_utils_dir() -> Path:
    """Folder of triton_python_backend_utils.py inside the nvidia-pytriton wheel."""
    import pytriton  # the serve extra; imported where used

    return Path(pytriton.__file__).parent / "tritonserver" / "backends" / "python"


def load_step(model_py: Path, name: str = "step_under_test") -> ModuleType:
    utils = str(backend_utils_dir())
    if utils not in sys.path:
        sys.path.append(utils)
    spec = importlib.util.spec_from_file_location(name, model_py)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def step_output(model: Any, module: ModuleType, images: list[bytes]) -> np.ndarray:
    """What the step writes for these images (its fill() over one batch, as execute() runs it)."""
    shape = (3, module.CROP_HEIGHT, module.CROP_WIDTH) if module.LAYOUT == "NCHW" else (module.CROP_HEIGHT, module.CROP_WIDTH, 3)
    batch = np.empty((len(images), *shape), dtype=np.float32)
    for index, data in enumerate(images):
        model.fill(batch, index, data)
    return batch


def reference_output(transforms: Any, images: list[bytes]) -> np.ndarray:
    import io

    from PIL import Image

    return np.stack([transforms(Image.open(io.BytesIO(data)).convert("RGB")).numpy() for data in images])


def image_accuracy(model_py: Path, transforms: Any, count: int = 4, sizes: tuple[str, ...] = tuple(SIZES),
                   smaller_draft: tuple[str, ...] = ()) -> dict[str, dict[str, float]]:
    """size -> {mean_abs, max_abs} in normalised units, the step vs torchvision on the same JPEGs.

    For the sizes in ``smaller_draft`` also {smaller_draft_mean_abs, smaller_draft_max_abs}: the same step with
    its DRAFT_MARGIN at 1, so JPEG draft decodes at the smallest scale that does not upscale (one scale below
    the default margin of 2): what decoding any less costs in accuracy."""
    module = load_step(model_py)
    model = module.TritonPythonModel()
    model.initialize({})
    margin = module.DRAFT_MARGIN
    try:
        figures = {}
        for size in sizes:
            images = photos(size, count, seed=7)
            reference = reference_output(transforms, images)
            diff = np.abs(step_output(model, module, images) - reference)
            figures[size] = {"mean_abs": float(diff.mean()), "max_abs": float(diff.max())}
            if size in smaller_draft:
                module.DRAFT_MARGIN = 1  # the step reads its module's constant per image
                try:
                    diff = np.abs(step_output(model, module, images) - reference)
                finally:
                    module.DRAFT_MARGIN = margin
                figures[size] |= {"smaller_draft_mean_abs": float(diff.mean()), "smaller_draft_max_abs": float(diff.max())}
        return figures
    finally:
        model.finalize()
