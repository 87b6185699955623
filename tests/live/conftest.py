"""Tests of ``repo_builder/live/`` (``validate --live``): the repository builders they share with the Triton
tests live in ``tests/triton/`` (``triton_repo_factory``, ``onnx_repo_factory``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "triton"))
