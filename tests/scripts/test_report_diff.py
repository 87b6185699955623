"""scripts/report_diff.py: validate's reports from a base checkout against this one. It finds the repositories
of a corpus folder, says nothing differs when the code is the same, and names the report that changed when a
rule's words do."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
ROOT = SCRIPTS.parent
_spec = importlib.util.spec_from_file_location("report_diff", SCRIPTS / "report_diff.py")
assert _spec and _spec.loader
report_diff = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report_diff)


def _corpus(folder: Path) -> Path:
    """A test's temporary folder holding one repository with a model RB402 refuses, and one clean model."""
    repo = folder / "test_x0" / "models"
    for name, config in (("odd", 'platform: "onnx"'), ("fine", 'backend: "python"')):
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "config.pbtxt").write_text(f'name: "{name}" {config}\n')
    (repo / "fine" / "1" / "model.py").write_text("class TritonPythonModel:\n    def execute(self, requests):\n        return []\n")
    return folder


def _run(base: Path, corpus: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / "report_diff.py"), str(base), "--corpus", str(corpus), "--no-conformance", "--models", "6"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_repositories_under_finds_each_repository_holding_a_model_folder(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    found = report_diff.repositories_under(corpus)
    assert corpus / "test_x0" / "models" in found
    assert all(p.is_relative_to(corpus) for p in found)


def test_differences_names_changed_and_one_sided_reports() -> None:
    base = {"a|default": [0, {"x": 1}], "b|default": [1, {}], "gone|strict": [0, {}]}
    new = {"a|default": [0, {"x": 1}], "b|default": [1, {"y": 2}], "added|strict": [0, {}]}
    assert report_diff.differences(base, new) == ["added|strict", "b|default", "gone|strict"]
    assert report_diff.differences(base, dict(base)) == []


def test_report_diff_exits_0_when_the_base_is_this_checkout(tmp_path: Path) -> None:
    done = _run(ROOT, _corpus(tmp_path / "corpus"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 of " in done.stdout and "crashes here: 0" in done.stdout


def test_report_diff_exits_1_naming_the_report_when_a_rule_says_something_else(tmp_path: Path) -> None:
    base = tmp_path / "base"
    shutil.copytree(ROOT / "repo_builder", base / "repo_builder", ignore=shutil.ignore_patterns("__pycache__"))
    platform = base / "repo_builder" / "validate" / "rules" / "platform.py"
    text = platform.read_text()
    assert "unexpected platform type" in text
    platform.write_text(text.replace("unexpected platform type", "an unknown platform type"))
    done = _run(base, _corpus(tmp_path / "corpus"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DIFFERS" in done.stdout and "models|default" in done.stdout and "an unknown platform type" in done.stdout
