"""``repo-builder validate``: exit codes, formats, one-line user errors, and Triton's documentation examples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from validate_repo_helpers import ADD_SUB_MODEL_PY, make_add_sub, make_model, onnx_bytes, onnx_config

from repo_builder.cli.main import main

REPO_BUILDER = str(Path(sys.executable).parent / "repo-builder")

# The ensemble of Triton's docs (user_guide/architecture.md "Ensemble Models"), reduced to two steps over
# the add_sub Python model and an ONNX model.
ENSEMBLE = '''name: "pipeline"
platform: "ensemble"
max_batch_size: 0
input [{ name: "A" data_type: TYPE_FP32 dims: [4] }, { name: "B" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "RESULT" data_type: TYPE_FP32 dims: [4] }]
ensemble_scheduling {
  step [
    {
      model_name: "add_sub"
      model_version: -1
      input_map { key: "INPUT0" value: "A" }
      input_map { key: "INPUT1" value: "B" }
      output_map { key: "OUTPUT0" value: "sum" }
    },
    {
      model_name: "scale"
      model_version: -1
      input_map { key: "x" value: "sum" }
      output_map { key: "y" value: "RESULT" }
    }
  ]
}
'''


def make_docs_repository(root: Path) -> Path:
    """add_sub (Python), an ONNX model with a written config, one without a config, and an ensemble of them."""
    make_add_sub(root)
    graph = onnx_bytes([("x", "FLOAT", [4])], [("y", "FLOAT", [4])])
    make_model(root, "scale", onnx_config("scale", 0, [("x", "TYPE_FP32", [4])], [("y", "TYPE_FP32", [4])]),
               {1: {"model.onnx": graph}})
    batched = onnx_bytes([("input", "FLOAT", ["N", 3])], [("output", "FLOAT", ["N", 3])])
    make_model(root, "autocompleted", None, {1: {"model.onnx": batched}})
    make_model(root, "pipeline", ENSEMBLE, {1: {".keep": ""}})
    return root


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([REPO_BUILDER, "validate", *args], capture_output=True, text=True, timeout=120)


def test_validate_passes_when_repository_follows_triton_documentation(repo: Path) -> None:
    make_docs_repository(repo)
    result = run(str(repo), "--format", "json")
    assert result.returncode == 0, result.stdout
    doc = json.loads(result.stdout)
    assert doc["ok"] is True
    assert [d for d in doc["diagnostics"] if d["severity"] != "info"] == []
    assert {m["name"] for m in doc["models"]} == {"add_sub", "scale", "autocompleted", "pipeline"}


def test_validate_exits_1_when_repository_has_errors(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_model(repo, "m", 'backend: "python"\n', {1: {}})
    assert main(["validate", str(repo)]) == 1
    assert "RB405" in capsys.readouterr().out


def test_validate_fail_on_warning_exits_1_when_only_warnings(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_add_sub(repo)
    (repo / "add_sub" / "01").mkdir()
    assert main(["validate", str(repo)]) == 0
    assert main(["validate", str(repo), "--fail-on", "warning"]) == 1
    assert "RB107" in capsys.readouterr().out


def test_validate_strict_refuses_missing_config(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_model(repo, "m", None, {1: {"model.onnx": onnx_bytes([("x", "FLOAT", [4])], [("y", "FLOAT", [4])])}})
    assert main(["validate", str(repo)]) == 0
    assert main(["validate", str(repo), "--strict"]) == 1
    capsys.readouterr()


def test_validate_gpu_option_decides_kind_gpu_instances(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = 'backend: "python"\ninstance_group [{ kind: KIND_GPU }]\n'
    make_model(repo, "m", config, {1: {"model.py": ADD_SUB_MODEL_PY}})
    assert main(["validate", str(repo), "--no-gpu"]) == 1
    assert main(["validate", str(repo), "--gpu"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("/definitely/not/here",), "error: /definitely/not/here: no such folder"),
        (("gs://bucket/models",), "only local folders and s3:// URLs"),
    ],
)
def test_validate_exits_2_with_one_line_when_path_is_bad(args: tuple[str, ...], needle: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert needle in result.stderr and "Traceback" not in result.stderr


def test_validate_exits_2_when_path_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "config.pbtxt"
    file.write_text("")
    result = run(str(file))
    assert result.returncode == 2 and "not a folder" in result.stderr


@pytest.mark.parametrize("args", [("--format", "xml"), ("--tritonserver", "/x"), ("--fail-on", "info"), ("--load-timeout", "0", "--live")])
def test_validate_exits_2_on_usage_errors(repo: Path, args: tuple[str, ...]) -> None:
    assert main(["validate", str(repo), *args]) == 2


def test_validate_output_writes_report_file_and_summary_to_stderr(repo: Path, tmp_path: Path) -> None:
    make_add_sub(repo)
    out = tmp_path / "report.xml"
    result = run(str(repo), "--format", "junit", "--output", str(out))
    assert result.returncode == 0 and result.stdout == ""
    assert out.read_text().startswith('<?xml version="1.0"')
    assert result.stderr.startswith("OK: 1 model(s)")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []  # no staging leftovers


def test_validate_output_exits_2_when_folder_missing(repo: Path, tmp_path: Path) -> None:
    assert main(["validate", str(repo), "--output", str(tmp_path / "no" / "report.json")]) == 2


def test_validate_live_fails_cleanly_when_live_module_missing(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    make_add_sub(repo)
    monkeypatch.setitem(sys.modules, "repo_builder.validate.live", None)  # as if the module did not exist
    assert main(["validate", str(repo), "--live"]) == 2
    assert "--live is not available" in capsys.readouterr().err


def test_validate_github_format_prints_annotations(repo: Path) -> None:
    make_model(repo, "m", 'backend: "python"\n', {1: {}})
    result = run(str(repo), "--format", "github")
    assert result.returncode == 1
    assert any(line.startswith("::error file=") and "RB405" in line for line in result.stdout.splitlines())


@pytest.mark.triton
def test_validate_live_adds_server_verdict_per_model(repo: Path) -> None:
    pytest.importorskip("pytriton", reason="the serve extra (embedded tritonserver) is not installed")
    make_add_sub(repo)
    result = run(str(repo), "--live", "--format", "json", "--load-timeout", "60")
    assert result.returncode == 0, result.stdout + result.stderr
    model = json.loads(result.stdout)["models"][0]
    assert model["live"]["loaded"] is True


def test_validate_never_imports_grpc_and_leaves_the_grpc_client_usable(repo: Path) -> None:
    make_docs_repository(repo)
    code = f"""
import sys
from repo_builder.cli.main import main
rc = main(["validate", {str(repo)!r}, "--format", "json"])
assert rc == 0, rc
assert "grpc" not in sys.modules, "validate imported grpc"
heavy = ("numpy", "onnx", "jinja2", "torch", "rich", "repo_builder.compile")
assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]
from tritonclient.grpc import model_config_pb2  # still the cheap module
assert "grpc" not in sys.modules
import tritonclient.grpc as client  # any other use runs the real package
assert client.InferenceServerClient and "grpc" in sys.modules
from tritonclient.grpc import model_config_pb2 as again
assert again is model_config_pb2
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_validate_live_refused_for_object_store_paths() -> None:
    assert main(["validate", "s3://bucket/models", "--live"]) == 2


@pytest.mark.parametrize("enabled_before", [True, False])
def test_cycle_collector_paused_restores_collector_state_when_block_raises(enabled_before: bool) -> None:
    import gc

    from repo_builder.cli.validate import cycle_collector_paused

    was = gc.isenabled()
    (gc.enable if enabled_before else gc.disable)()
    try:
        with pytest.raises(RuntimeError), cycle_collector_paused():
            assert not gc.isenabled()
            raise RuntimeError("a failing scan")
        assert gc.isenabled() is enabled_before
    finally:
        (gc.enable if was else gc.disable)()
