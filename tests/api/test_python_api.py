"""The documented Python API (docs/api.md), used only through ``repo_builder.<name>``."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import repo_builder

ADD_SUB_CONFIG = """name: "add_sub"
backend: "python"
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [4] }]
"""
ADD_SUB_MODEL = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            a = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            b = pb_utils.get_input_tensor_by_name(r, "INPUT1").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a + b), pb_utils.Tensor("OUTPUT1", a - b)]))
        return out
"""


def make_repository(root: Path, *, broken: bool = False) -> Path:
    (root / "add_sub" / "1").mkdir(parents=True)
    (root / "add_sub" / "config.pbtxt").write_text(ADD_SUB_CONFIG)
    (root / "add_sub" / "1" / "model.py").write_text(ADD_SUB_MODEL)
    if broken:
        (root / "broken" / "1").mkdir(parents=True)
        (root / "broken" / "config.pbtxt").write_text('backend: "python"\nmax_batch_size: -1\n')
    return root


def test_import_repo_builder_stays_light_when_the_api_is_used_for_validate(tmp_path: Path) -> None:
    make_repository(tmp_path)
    code = f"""
import sys
import repo_builder
assert "repo_builder.validate" not in sys.modules, "import repo_builder loaded validate"
report = repo_builder.validate({str(tmp_path)!r})
assert report.ok, report.diagnostics
heavy = [m for m in ("torch", "onnxruntime", "transformers", "jinja2", "tensorrt", "s3fs") if m in sys.modules]
assert not heavy, heavy
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_validate_returns_a_passing_report_when_repository_is_good(tmp_path: Path) -> None:
    report = repo_builder.validate(make_repository(tmp_path))
    assert isinstance(report, repo_builder.Report)
    assert report.ok and report.exit_code() == 0
    assert [m.name for m in report.models] == ["add_sub"]


def test_validate_returns_the_diagnostics_when_repository_has_errors(tmp_path: Path) -> None:
    report = repo_builder.validate(str(make_repository(tmp_path, broken=True)))
    assert not report.ok and report.exit_code() == 1
    assert "RB301" in {d.code for d in report.diagnostics if d.model == "broken"}


def test_validate_takes_the_cli_options_as_keywords_when_called(tmp_path: Path) -> None:
    root = make_repository(tmp_path)
    config = root / "add_sub" / "config.pbtxt"
    config.write_text(ADD_SUB_CONFIG + "instance_group [{ kind: KIND_GPU }]\n")
    assert repo_builder.validate(root).ok  # the default target is a server with GPUs
    assert not repo_builder.validate(root, gpu=False).ok


def test_validate_raises_user_error_when_path_is_missing(tmp_path: Path) -> None:
    with pytest.raises(repo_builder.UserError, match="no such folder"):
        repo_builder.validate(tmp_path / "missing")


def test_validate_raises_user_error_when_triton_release_is_not_in_the_table(tmp_path: Path) -> None:
    repo = make_repository(tmp_path)
    with pytest.raises(repo_builder.UserError, match=r"26\.01 is not in the TensorRT version table .*--tensorrt-version"):
        repo_builder.validate(repo, triton_release="26.01")
    assert repo_builder.validate(repo, triton_release="26.01", tensorrt_version="10.13.2").ok


def test_validate_report_renders_like_the_cli_when_rendered_as_json(tmp_path: Path) -> None:
    root = make_repository(tmp_path, broken=True)
    doc = json.loads(repo_builder.render_report(repo_builder.validate(root), "json"))
    cli = subprocess.run(
        [sys.executable, "-m", "repo_builder", "validate", str(root), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 1 and json.loads(cli.stdout) == doc


def test_validate_is_still_the_subpackage_when_its_modules_are_imported() -> None:
    import repo_builder.validate.engine as engine

    assert callable(repo_builder.validate)
    assert repo_builder.validate.engine is engine
    assert repo_builder.validate.__name__ == "repo_builder.validate"


def test_every_api_name_resolves_without_importing_torch_when_accessed() -> None:
    code = """
import sys
import repo_builder
missing = [n for n in repo_builder.__all__ if getattr(repo_builder, n, None) is None]
assert not missing, missing
assert "torch" not in sys.modules and "onnxruntime" not in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_unknown_name_raises_attribute_error_when_accessed() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        repo_builder.nope  # noqa: B018


def test_every_api_name_has_a_docstring_when_documented() -> None:
    for name in ("validate_location", "build", "serve", "export_resnet50", "export_text_classifier"):
        assert (getattr(repo_builder, name).__doc__ or "").strip(), name
    assert "path_or_url" in (importlib.import_module("repo_builder.api").validate.__doc__ or "")
    docs = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    for name in ("repo_builder.validate(", "repo_builder.build(", "repo_builder.serve(", "repo_builder.export_resnet50("):
        assert name in docs, name


@pytest.mark.triton
@pytest.mark.slow
def test_serve_answers_a_request_when_used_as_a_context_manager(tmp_path: Path) -> None:
    pytest.importorskip("pytriton", reason="the serve extra (embedded tritonserver) is not installed")
    np = pytest.importorskip("numpy")
    root = make_repository(tmp_path)
    with repo_builder.serve(root) as serving:
        assert [(r.name, r.state) for r in serving.rows] == [("add_sub", "READY")]
        a, b = np.arange(4, dtype=np.float32), np.ones(4, dtype=np.float32)
        result = serving.server.infer("add_sub", {"INPUT0": a, "INPUT1": b})
        assert result["OUTPUT0"].tolist() == (a + b).tolist()


@pytest.mark.slow
def test_export_then_build_gives_a_repository_validate_passes_when_called_through_the_api(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the export extra is not installed")
    pytest.importorskip("transformers", reason="the export extra is not installed")
    from repo_builder.export.tiny_models import make_tiny_text_classifier  # a test fixture, not the API

    model = make_tiny_text_classifier(tmp_path / "bert", num_labels=2, seed=0)
    artifact = repo_builder.export_text_classifier(model, tmp_path / "export", check_parity=False)
    assert artifact.onnx_path.is_file()
    request = repo_builder.BuildRequest(
        "text-classifier", tmp_path / "models", params={"from_export": tmp_path / "export"}, runtime="python"
    )
    outcome = repo_builder.build(request)
    assert outcome.ok, outcome.check.lines
    report = repo_builder.validate(tmp_path / "models", gpu=False)
    assert report.ok and outcome.result.ensemble in {m.name for m in report.models}
