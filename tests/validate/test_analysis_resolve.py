"""analysis/resolve.py: platform/backend resolution and the model files a backend loads."""

from __future__ import annotations

from pathlib import Path

from support.validate_repo_helpers import make_model

from repo_builder.validate.analysis.resolve import model_file_names, resolve_backend
from repo_builder.validate.scan import scan_repository


def _resolved(repo: Path, config: str | None, files: dict) -> object:
    make_model(repo, "m", config, {1: files})
    return resolve_backend(scan_repository(repo).models[0])


def test_resolve_backend_detects_onnx_from_first_version_folder(repo: Path) -> None:
    r = _resolved(repo, None, {"model.onnx": b"x"})
    assert (r.platform, r.backend, r.detected_from) == ("onnxruntime_onnx", "onnxruntime", "1/model.onnx")


def test_resolve_backend_prefers_graphdef_when_both_tensorflow_files_exist(repo: Path) -> None:
    r = _resolved(repo, None, {"model.graphdef": b"x", "model.savedmodel": {"saved_model.pb": b""}})
    assert r.platform == "tensorflow_graphdef"


def test_resolve_backend_reports_problem_when_nothing_decides(repo: Path) -> None:
    r = _resolved(repo, 'name: "m"\n', {})
    assert r.problem is not None and "Could not determine backend" in r.problem


def test_model_file_names_adds_dali_fallback_after_configured_name(repo: Path) -> None:
    r = _resolved(repo, 'backend: "dali"\ndefault_model_filename: "pipe.dali"\n', {})
    assert model_file_names(r) == ("pipe.dali", "dali.py")


def test_model_file_names_uses_pt2_for_torch_aoti(repo: Path) -> None:
    r = _resolved(repo, 'platform: "torch_aoti"\n', {})
    assert model_file_names(r) == ("model.pt2",)


def test_model_file_names_tries_model_py_then_model_pt_when_pytorch_runtime_is_python(repo: Path) -> None:
    r = _resolved(repo, 'backend: "pytorch"\nruntime: "model.py"\n', {})
    assert (r.default_model_filename, model_file_names(r)) == ("", ("model.py", "model.pt"))


def test_model_file_names_keeps_model_pt_default_when_pytorch_has_no_runtime(repo: Path) -> None:
    r = _resolved(repo, 'backend: "pytorch"\n', {})
    assert model_file_names(r) == ("model.pt",)
