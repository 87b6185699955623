"""analysis/autocomplete.py: what auto-complete fills, per backend and per declared tensors."""

from __future__ import annotations

from pathlib import Path

from support.validate_repo_helpers import make_model

from repo_builder.validate.analysis.autocomplete import backend_fills_io, declared_io_filled, io_autocompleted
from repo_builder.validate.records import RuleContext, ValidateOptions
from repo_builder.validate.scan import scan_repository

PY_HOOK = "class TritonPythonModel:\n    @staticmethod\n    def auto_complete_config(c):\n        return c\n"
PY_PLAIN = "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"


def _ctx(repo: Path, strict: bool = False) -> tuple[object, RuleContext]:
    scanned = scan_repository(repo)
    return scanned.models[0], RuleContext(scanned, ValidateOptions(strict=strict))


def test_io_autocompleted_for_onnx_only_when_inputs_or_outputs_are_missing(repo: Path) -> None:
    make_model(repo, "m", 'backend: "onnxruntime"\ninput [ { name: "x" } ]\n', {1: {"model.onnx": b"x"}})
    model, ctx = _ctx(repo)
    assert io_autocompleted(model, ctx)  # no outputs declared: the backend fills them
    assert not declared_io_filled(model, ctx)  # but never the declared input's fields


def test_declared_io_filled_for_tensorrt_unless_strict(repo: Path) -> None:
    make_model(repo, "m", 'platform: "tensorrt_plan"\ninput [ { name: "x" } ]\n', {1: {"model.plan": b"x"}})
    model, ctx = _ctx(repo)
    assert declared_io_filled(model, ctx)
    assert not declared_io_filled(*_ctx(repo, strict=True))


def test_backend_fills_io_for_python_only_with_auto_complete_config(repo: Path) -> None:
    make_model(repo, "m", 'backend: "python"\n', {1: {"model.py": PY_PLAIN}})
    assert not backend_fills_io(_ctx(repo)[0])
    (repo / "m" / "1" / "model.py").write_text(PY_HOOK)
    assert backend_fills_io(_ctx(repo)[0])


def test_backend_fills_io_never_for_pytorch(repo: Path) -> None:
    make_model(repo, "m", 'backend: "pytorch"\n', {1: {"model.pt": b"x"}})
    assert not backend_fills_io(_ctx(repo)[0])
