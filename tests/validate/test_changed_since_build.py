"""Integrity findings are their own class (issue 38 item 1): a file the build recorded that is missing or
changed is reported as "changed since build"; it fails the gate only when Triton or the step reads it to
load and answer, and it never makes Triton's verdict on the model "refused"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from repo_builder.render.rendered import RenderedModel
from repo_builder.repository.manifest import update_manifest
from repo_builder.repository.stage import build_stage
from repo_builder.repository.writer import commit_models, stage_model
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Severity, ValidateOptions

STEP = """name: "post"
backend: "python"
max_batch_size: 4
input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]
"""
ENSEMBLE = """name: "pipeline"
platform: "ensemble"
max_batch_size: 4
input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]
ensemble_scheduling { step [{ model_name: "post" model_version: -1 input_map { key: "x" value: "x" } output_map { key: "y" value: "y" } }] }
"""
MODEL_PY = b"class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """A repository written the way build writes one (stage, commit, manifest): a Python step with its
    tokenizer and labels, and an ensemble whose version folder holds a README.md."""
    out = tmp_path / "repo"
    step = RenderedModel("post", "postprocess", 1, STEP, {
        "model.py": MODEL_PY, "labels.txt": b"a\nb\n", "tokenizer/tokenizer.json": b"{}", "README.md": b"# post\n",
    })
    ensemble = RenderedModel("pipeline", "ensemble", 1, ENSEMBLE, {"README.md": b"# what it serves\n"})
    with build_stage(out) as stage:
        staged = [stage_model(stage, m) for m in (step, ensemble)]
        commit_models(stage, staged, judge=None)
    update_manifest(out, staged, {"runtime": "python"})
    return out


def _validate(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "repo_builder", "validate", str(repo), "--isolated", "--format", "json", *args],
        capture_output=True, text=True, check=False, timeout=120,
    )


def _rb002(done: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    return [(d["severity"], d["message"]) for d in json.loads(done.stdout)["diagnostics"] if d["code"] == "RB002"]


def test_built_repository_passes_when_nothing_changed(built: Path) -> None:
    done = _validate(built)
    assert done.returncode == 0 and _rb002(done) == [], done.stdout


def test_removed_readme_of_ensemble_is_a_warning_and_exit_0_when_nothing_loads_it(built: Path) -> None:
    (built / "pipeline" / "1" / "README.md").unlink()
    done = _validate(built)
    assert done.returncode == 0, done.stdout + done.stderr
    [(severity, message)] = _rb002(done)
    assert severity == "warning" and "'pipeline/1/README.md' changed since build: missing" in message
    assert all(m["ok"] for m in json.loads(done.stdout)["models"])


def test_removed_readme_is_an_error_when_strict_manifest_is_given(built: Path) -> None:
    (built / "pipeline" / "1" / "README.md").unlink()
    (built / "post" / "1" / "README.md").write_text("# edited\n")
    done = _validate(built, "--strict-manifest")
    assert done.returncode == 1
    assert sorted(s for s, _ in _rb002(done)) == ["error", "error"]


@pytest.mark.parametrize("relative", ["model.py", "labels.txt", "tokenizer/tokenizer.json"])
def test_changed_step_file_fails_the_gate_but_is_no_refusal_when_the_step_reads_it(built: Path, relative: str) -> None:
    path = built / "post" / "1" / relative
    path.write_bytes(path.read_bytes() + b"\n# edited by hand\n")
    done = _validate(built)
    assert done.returncode == 1, done.stdout
    [(severity, message)] = _rb002(done)
    assert severity == "error" and f"'post/1/{relative}' changed since build: its sha256 differs" in message
    assert "refused" not in message
    # Triton loads it: the verdict on the model (and on the ensemble using it) stays "ok".
    assert {m["name"]: m["ok"] for m in json.loads(done.stdout)["models"]} == {"post": True, "pipeline": True}


def test_changed_readme_of_a_step_is_a_warning_when_only_documentation_changed(built: Path) -> None:
    (built / "post" / "1" / "README.md").write_text("# edited\n")
    report = validate_repository(built, ValidateOptions())
    [d] = [d for d in report.diagnostics if d.code == "RB002"]
    assert d.severity == Severity.WARNING and report.exit_code() == 0


def test_python_api_takes_strict_manifest_as_the_command_does(built: Path) -> None:
    from repo_builder.api import validate

    (built / "pipeline" / "1" / "README.md").unlink()
    assert validate(built).ok
    assert not validate(built, strict_manifest=True).ok
