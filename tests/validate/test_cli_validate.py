"""``repo-builder validate``: exit codes, formats, one-line user errors, and Triton's documentation examples."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.validate_repo_helpers import ADD_SUB_MODEL_PY, make_add_sub, make_model, onnx_bytes, onnx_config

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


def test_validate_output_creates_missing_folders_when_output_path_is_nested(repo: Path, tmp_path: Path) -> None:
    make_add_sub(repo)
    out = tmp_path / "no" / "such" / "report.json"
    assert main(["validate", str(repo), "--format", "json", "--output", str(out)]) == 0
    assert json.loads(out.read_text())["ok"] is True


def test_validate_report_file_gets_umask_permissions_when_written(repo: Path, tmp_path: Path) -> None:
    make_add_sub(repo)
    out = tmp_path / "report.json"
    old = os.umask(0o022)
    try:
        assert main(["validate", str(repo), "--format", f"json={out}"]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644  # not mkstemp's 0600: a CI upload step may run as another user


@pytest.mark.parametrize("where", ["under-a-file", "read-only"])
def test_validate_output_exits_2_with_one_line_when_folder_cannot_be_written(repo: Path, tmp_path: Path, where: str) -> None:
    make_add_sub(repo)
    if where == "under-a-file":
        (tmp_path / "file").write_text("")
        out = tmp_path / "file" / "sub" / "report.json"
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        if os.access(locked, os.W_OK):  # root ignores the mode bits
            locked = Path("/proc/self")  # no one can create files here
        out = locked / "report.json"
    result = run(str(repo), "--output", str(out))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(out) in result.stderr and result.stdout == ""


def test_validate_writes_every_format_in_one_run_when_format_given_several_times(repo: Path, tmp_path: Path) -> None:
    make_model(repo, "m", 'backend: "python"\n', {1: {}})
    sarif, junit, doc = tmp_path / "out" / "results.sarif", tmp_path / "out" / "j.xml", tmp_path / "r.json"
    result = run(str(repo), "--format", "text", "--format", f"sarif={sarif}", "--format", f"junit={junit}", "--format", f"json={doc}")
    assert result.returncode == 1
    assert result.stdout.startswith("repository ") and "RB405" in result.stdout
    assert json.loads(sarif.read_text())["runs"][0]["results"][0]["ruleId"] == "RB405"
    assert junit.read_text().startswith('<?xml version="1.0"')
    assert json.loads(doc.read_text())["ok"] is False


@pytest.mark.parametrize(
    "args",
    [
        ("--format", "json", "--format", "text"),  # two to stdout
        ("--format", "xml=out.xml"),
        ("--format", "json="),
        ("--format", "json=a.json", "--format", "junit=a.json"),
        ("--format", "json=a.json", "--output", "b.json"),
        ("-q", "-v"),
    ],
)
def test_validate_exits_2_when_format_options_conflict(repo: Path, args: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(repo), *args]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_validate_json_ok_agrees_with_exit_code_when_fail_on_warning(repo: Path) -> None:
    make_add_sub(repo)
    (repo / "add_sub" / "01").mkdir()
    result = run(str(repo), "--format", "json", "--fail-on", "warning")
    assert result.returncode == 1 and json.loads(result.stdout)["ok"] is False


def test_validate_offers_a_reporter_when_it_is_added_to_the_registry(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from repo_builder.validate import reporters

    make_add_sub(repo)
    fake = reporters.Reporter("count", lambda report, settings: f"{len(report.models)} model(s)\n", "a test reporter")
    monkeypatch.setitem(reporters.REPORTERS, "count", fake)
    assert main(["validate", str(repo), "--format", "count"]) == 0
    assert capsys.readouterr().out == "1 model(s)\n"


def test_validate_quiet_prints_only_summary_when_repository_is_clean(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_add_sub(repo)
    assert main(["validate", str(repo), "-q"]) == 0
    out = capsys.readouterr().out
    assert "add_sub" not in out and out.splitlines()[-1].startswith("OK: 1 model(s)")


def test_validate_judges_for_a_gpu_server_when_gpu_option_not_given(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = 'backend: "python"\ninstance_group [{ kind: KIND_GPU }]\n'
    make_model(repo, "m", config, {1: {"model.py": ADD_SUB_MODEL_PY}})
    assert main(["validate", str(repo)]) == 0  # the verdict does not depend on the CI runner's GPUs
    capsys.readouterr()


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
    doc = json.loads(result.stdout)
    assert doc["models"][0]["live"]["loaded"] is True
    # The deploy target stays the one --gpu/--no-gpu names (a GPU server by default); the target line
    # also says which machine proved it live.
    assert doc["target"].startswith("GPU server") and "live on this machine (" in doc["target"]


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
# start-up: subprocess only for a model.py too deep to parse (RB407's child), difflib only for a mistyped code
on_use = ("subprocess", "difflib")
assert not [m for m in on_use if m in sys.modules], [m for m in on_use if m in sys.modules]
from tritonclient.grpc import model_config_pb2  # still the cheap module
assert "grpc" not in sys.modules
import tritonclient.grpc as client  # any other use runs the real package
assert client.InferenceServerClient and "grpc" in sys.modules
from tritonclient.grpc import model_config_pb2 as again
assert again is model_config_pb2
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("enabled_before", [True, False])
def test_cycle_collector_paused_restores_collector_state_when_block_raises(enabled_before: bool) -> None:
    import gc

    from repo_builder.validate.location import cycle_collector_paused

    was = gc.isenabled()
    (gc.enable if enabled_before else gc.disable)()
    try:
        with pytest.raises(RuntimeError), cycle_collector_paused():
            assert not gc.isenabled()
            raise RuntimeError("a failing scan")
        assert gc.isenabled() is enabled_before
    finally:
        (gc.enable if was else gc.disable)()


TENSORRT_CONFIG = '''name: "engine"
platform: "tensorrt_plan"
max_batch_size: 0
input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]
instance_group [{ kind: KIND_GPU count: 1 }]
'''


def make_tensorrt_repository(root: Path, built_with: str) -> Path:
    """One TensorRT model whose plan.json says which TensorRT built its plan."""
    sidecar = {"format": 1, "plans": {"model.plan": {"tensorrt_version": built_with, "compute_capability": "8.6"}}}
    make_model(root, "engine", TENSORRT_CONFIG, {1: {"model.plan": b"engine bytes", "plan.json": json.dumps(sidecar)}})
    return root


@pytest.mark.parametrize(
    ("release", "needle"),
    [("26.01", "not in the TensorRT version table"), ("banana", "is not a release like 24.08"), ("25.07", "no Triton py3 container")],
)
def test_validate_exits_2_listing_known_releases_when_triton_release_is_bad(
    repo: Path, release: str, needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["validate", str(repo), "--triton-release", release, "--format", "json"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err.startswith("error: --triton-release") and captured.err.count("\n") == 1, captured.err
    assert needle in captured.err and "known: 23.01 .. 25.10" in captured.err


def test_validate_exits_2_with_one_line_when_tensorrt_version_is_malformed(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(repo), "--tensorrt-version", "ten"])
    err = capsys.readouterr().err
    assert code == 2 and err == "error: --tensorrt-version 'ten' is not a version like 10.3.0\n"


def _rb707(args: list[str], capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    main(["validate", *args, "--format", "json"])
    return [d for d in json.loads(capsys.readouterr().out)["diagnostics"] if d["code"] == "RB707"]


def test_validate_tensorrt_version_overrides_release_when_plan_matches_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(make_tensorrt_repository(tmp_path / "r", built_with="10.5.0.18"))
    found = _rb707([root, "--triton-release", "24.8"], capsys)  # normalized to 24.08, which ships 10.3.0
    assert len(found) == 1 and "Triton 24.08 ships TensorRT 10.3.0" in str(found[0]["message"])
    assert _rb707([root, "--tensorrt-version", "10.5.0"], capsys) == []
    # The override is the way to target a release the table does not know.
    assert _rb707([root, "--triton-release", "26.01", "--tensorrt-version", "10.5.0"], capsys) == []
    found = _rb707([root, "--tensorrt-version", "10.3.0"], capsys)
    assert len(found) == 1 and "the serving Triton ships TensorRT 10.3.0" in str(found[0]["message"])
