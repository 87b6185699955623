"""torch -> ONNX export with parity checks against onnxruntime.

torch, torchvision, transformers and onnxruntime are imported inside the functions that need them, so
importing this package (or ``repo_builder.export.onnx_reader``) stays light.
"""

from __future__ import annotations

from repo_builder.export.resnet50 import export_resnet50
from repo_builder.export.text_classifier import export_text_classifier
from repo_builder.export.tiny_models import make_tiny_text_classifier

__all__ = ["export_resnet50", "export_text_classifier", "make_tiny_text_classifier"]
