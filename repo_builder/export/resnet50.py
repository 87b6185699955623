"""torchvision ResNet50 -> model.onnx + signature.json + labels.txt: the alias of
``torchvision:resnet50`` that the README's first commands use (``--weights imagenet`` is its DEFAULT)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repo_builder.export.exporter import DEFAULT_OPSET
from repo_builder.export.parity import DEFAULT_TOLERANCE
from repo_builder.export.torchvision_classifier import (
    ModelChoice,
    export_torchvision_classifier,
    load_classifier,
)
from repo_builder.spec import OnnxArtifact

ARCH = "resnet50"


def resnet50_choice(weights: str) -> ModelChoice:
    """``imagenet`` (and ``default``): IMAGENET1K_V2; ``random``: seeded; else a state_dict file."""
    return ModelChoice(arch=ARCH, weights="default" if weights in ("imagenet", "default") else weights, display="ResNet50")


def export_resnet50(
    out_dir: Path,
    *,
    weights: str = "imagenet",
    opset: int = DEFAULT_OPSET,
    dynamic_hw: bool = False,
    check_parity: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: bool = False,
) -> OnnxArtifact:
    """Export ResNet50 with a dynamic batch axis (and optionally dynamic height/width) to ``out_dir``.

    ``weights``: "imagenet" (torchvision IMAGENET1K_V2 through torch's download cache), "random" (seeded),
    or a path to a state_dict / checkpoint (``.pt``, ``.pth``, ``.safetensors``).
    """
    return export_torchvision_classifier(
        out_dir, resnet50_choice(weights), opset=opset, dynamic_hw=dynamic_hw, check_parity=check_parity,
        tolerance=tolerance, progress=progress,
    )


def load_resnet50(weights: str, *, progress: bool = False) -> tuple[Any, dict[str, Any]]:
    """The model in eval mode and a description of where its weights came from."""
    return load_classifier(resnet50_choice(weights), progress=progress)
