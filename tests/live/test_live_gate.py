"""Issue 26 end to end on the embedded Triton: ``validate --live`` gates on a real request.

A text classifier is built once (the tiny BERT, Python runtime); copies of it get a typo in the
postprocess step's ``execute()``. With the family's real sample (the task recorded in repo-builder.json)
the failure is an error at ``STEP/1/model.py`` and its line; with only synthesized inputs (no manifest)
it stays a warning that the summary counts as not proven.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from repo_builder.cli.main import main

pytestmark = pytest.mark.triton
pytest.importorskip("pytriton", reason="the serve extra (embedded tritonserver) is not installed")
pytest.importorskip("transformers", reason="the export extra builds the tiny text classifier")

STEP = "sentiment_postprocess"
TYPO_LINE = "batch -= batch.max(axis=1, keepdims=True)"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    model = make_tiny_text_classifier(tmp_path_factory.mktemp("tiny-bert"), num_labels=3, seed=0)
    repo = tmp_path_factory.mktemp("gate") / "repo"
    code = main(["build", "text-classifier", "--model", str(model), "--runtime", "python", "--out", str(repo),
                 "--skip-parity", "--name", "sentiment", "-q"])
    assert code == 0
    return repo


def broken_copy(built: Path, target: Path) -> int:
    """A copy whose postprocess raises AttributeError on every request; returns the typo's line number."""
    shutil.copytree(built, target)
    model_py = target / STEP / "1" / "model.py"
    lines = model_py.read_text().splitlines()
    number = next(i for i, line in enumerate(lines, 1) if TYPO_LINE in line)
    lines[number - 1] = lines[number - 1].replace("batch.max(", "batch.maxx(")
    model_py.write_text("\n".join(lines) + "\n")
    return number


def run_live(repo: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["validate", str(repo), "--live", "--format", "json", *args])
    return code, json.loads(capsys.readouterr().out)


def test_validate_live_passes_when_the_built_pipeline_answers_its_family_sample(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_live(built, capsys)
    assert code == 0, report["diagnostics"]
    ensemble = next(m for m in report["models"] if m["name"] == "sentiment")
    assert ensemble["live"]["inferred"] is True and report["diagnostics"] == []


def test_validate_live_exits_1_naming_the_step_file_and_line_when_postprocess_raises(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = broken_copy(built, tmp_path / "repo")
    code, report = run_live(tmp_path / "repo", capsys)
    assert code == 1
    failed = [d for d in report["diagnostics"] if d["code"] == "RB903"]
    assert len(failed) == 1 and failed[0]["severity"] == "error"
    assert (failed[0]["path"], failed[0]["line"]) == (f"{STEP}/1/model.py", line)
    assert "a real request (English sentences, text-classification)" in failed[0]["message"]
    assert "AttributeError" in failed[0]["message"] and "repo-builder-live" not in failed[0]["message"]
    assert not report["ok"] and not next(m for m in report["models"] if m["name"] == "sentiment")["ok"]


def test_validate_live_text_says_where_when_postprocess_raises(built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = broken_copy(built, tmp_path / "repo")
    assert main(["validate", str(tmp_path / "repo"), "--live", "-q"]) == 1
    out = capsys.readouterr().out
    assert f"error   RB903 live-inference-failed  {STEP}/1/model.py:{line}" in out
    assert out.splitlines()[-1].startswith("FAILED: ")


def test_validate_live_warns_not_proven_when_only_synthesized_inputs_fail(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken_copy(built, tmp_path / "repo")
    (tmp_path / "repo" / "repo-builder.json").unlink()  # no recorded family: synthesized inputs only
    assert main(["validate", str(tmp_path / "repo"), "--live", "-q"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("OK: ") and "not proven: 1 ensemble(s) did not answer" in last
    assert main(["validate", str(tmp_path / "repo"), "--live", "-q", "--fail-on", "warning"]) == 1
    capsys.readouterr()


def test_validate_live_makes_input_files_a_real_request_when_given(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken_copy(built, tmp_path / "repo")
    (tmp_path / "repo" / "repo-builder.json").unlink()
    review = tmp_path / "review.txt"
    review.write_text("A wonderful film.")
    code, report = run_live(tmp_path / "repo", capsys, "--input", f"sentiment:TEXT={review}")
    failed = next(d for d in report["diagnostics"] if d["code"] == "RB903")
    assert code == 1 and failed["severity"] == "error" and "the --input files" in failed["message"]


def test_validate_refuses_input_without_live_when_given(built: Path, tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("x")
    assert main(["validate", str(built), "--input", f"TEXT={tmp_path / 't.txt'}"]) == 2
