"""Fixtures for validate tests: an empty repository folder and the builders of ``support.validate_repo_helpers``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.validate_repo_helpers import make_add_sub, make_model, onnx_bytes, validate


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """An empty model repository folder."""
    root = tmp_path / "models"
    root.mkdir()
    return root


@pytest.fixture
def model_factory() -> Callable[..., Path]:
    """``make_model(root, name, config_text, versions={1: {...}}, files={...})``."""
    return make_model


@pytest.fixture
def add_sub_factory() -> Callable[..., Path]:
    """``make_add_sub(root, name="add_sub")``: the Python backend's add_sub example."""
    return make_add_sub


@pytest.fixture
def onnx_factory() -> Callable[..., bytes]:
    """``onnx_bytes(inputs, outputs, initializers=(), ir_version=None)``: a tiny ONNX model's bytes."""
    return onnx_bytes


@pytest.fixture
def run_validate() -> Callable[..., object]:
    """``validate(root, strict=False, ...) -> Report``."""
    return validate
