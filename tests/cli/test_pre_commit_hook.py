"""``.pre-commit-hooks.yaml``: the hook pre-commit installs runs ``repo-builder validate`` on the folder the
user names, and fails the commit exactly when validate would."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

HOOKS = Path(__file__).parents[2] / ".pre-commit-hooks.yaml"
REPO_BUILDER = str(Path(sys.executable).parent / "repo-builder")


def hook() -> dict[str, Any]:
    hooks = yaml.safe_load(HOOKS.read_text())
    assert isinstance(hooks, list) and len(hooks) == 1
    return hooks[0]


def test_pre_commit_hook_declares_what_pre_commit_requires_when_loaded() -> None:
    h = hook()
    assert {"id", "name", "entry", "language"} <= set(h)
    assert h["id"] == "repo-builder-validate" and h["language"] == "python"
    assert h["pass_filenames"] is False  # validate takes the repository folder, not the changed files
    assert h["entry"].split()[:2] == ["repo-builder", "validate"]


@pytest.mark.parametrize(
    ("path", "matches"),
    [
        ("models/resnet50/config.pbtxt", True),
        ("models/pre/1/model.py", True),
        ("models/m/1/model.onnx", True),
        ("src/app.py", False),
        ("README.md", False),
    ],
)
def test_pre_commit_hook_runs_when_a_file_triton_reads_changes(path: str, matches: bool) -> None:
    assert bool(re.search(hook()["files"], path)) is matches


@pytest.mark.parametrize(("config", "code"), [('backend: "python"\n', 0), ('backend: "python"\nmax_batch_size: -1\n', 1)])
def test_pre_commit_hook_entry_fails_exactly_when_validate_refuses(tmp_path: Path, config: str, code: int) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(config)
    (tmp_path / "m" / "1" / "model.py").write_text("class TritonPythonModel:\n    def execute(self, requests):\n        return []\n")
    entry = shlex.split(hook()["entry"])
    done = subprocess.run([REPO_BUILDER, *entry[1:], str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stdout + done.stderr
