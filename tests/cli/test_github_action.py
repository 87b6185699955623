"""``action.yml``: the GitHub Action runs offline validate with annotations and a SARIF file, uploads it even
when validate fails, and fails the job exactly when validate does. Its validate step is run here for real
(bash, the same environment variables GitHub sets) against repositories that pass and fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ACTION = Path(__file__).parents[2] / "action.yml"


def action() -> dict[str, Any]:
    return yaml.safe_load(ACTION.read_text(encoding="utf-8"))


def step(name: str) -> dict[str, Any]:
    return next(s for s in action()["runs"]["steps"] if s.get("name") == name)


def test_action_declares_inputs_outputs_and_composite_steps_when_loaded() -> None:
    a = action()
    assert a["runs"]["using"] == "composite"
    assert a["inputs"]["path"]["required"] is True
    assert "exit-code" in a["outputs"]
    upload = step("Upload SARIF")
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert "always()" in upload["if"]  # a failing validate still uploads its findings
    for s in a["runs"]["steps"]:
        if "run" in s:  # inputs only through env: `${{ }}` pasted into a script is an injection
            assert "${{" not in s["run"], s["name"]


def _run_validate_step(repo: Path, tmp_path: Path, args: str = "") -> tuple[int, str, Path]:
    out = tmp_path / "github_output"
    out.write_text("")
    sarif = tmp_path / "out.sarif"
    env = {
        **os.environ,
        "REPOSITORY": str(repo),
        "ARGS": args,
        "SARIF": str(sarif),
        "GITHUB_OUTPUT": str(out),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        ["bash", "-e", "-c", step("repo-builder validate")["run"]],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr  # the step itself succeeds; the verdict step fails the job
    code = int(dict(line.split("=", 1) for line in out.read_text().split())["exit-code"])
    return code, done.stdout, sarif


@pytest.mark.parametrize(
    ("config", "args", "code"),
    [
        ('backend: "python"\n', "", 0),
        ('backend: "python"\nmax_batch_size: -1\n', "", 1),
        ('backend: "python"\nmax_batch_size: -1\n', "--no-gpu --fail-on warning", 1),
    ],
)
def test_action_validate_step_reports_exit_code_and_writes_sarif(
    tmp_path: Path, config: str, args: str, code: int
) -> None:
    repo = tmp_path / "models"
    (repo / "m" / "1").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text(config)
    (repo / "m" / "1" / "model.py").write_text(
        "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    )
    got, stdout, sarif = _run_validate_step(repo, tmp_path, args)
    assert got == code
    doc = json.loads(sarif.read_text())
    assert doc["version"] == "2.1.0"
    assert bool(doc["runs"][0]["results"]) is bool(code)
    if code:
        assert stdout.startswith("::error ")  # annotations on the pull request


def test_action_verdict_step_fails_exactly_when_validate_failed() -> None:
    script = step("Verdict")["run"]
    for code in (0, 1):
        done = subprocess.run(["bash", "-c", script], env={**os.environ, "CODE": str(code)}, check=False)
        assert done.returncode == code
