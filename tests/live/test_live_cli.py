"""``repo-builder validate --live`` on the command line: progress lines per model on stderr as its load
starts and as it ends (none with ``-q``), and each model's live status and how it was proven in the JSON report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.onnx_repo_factory import write_onnx_model
from support.triton_repo_factory import write_double_repository

from repo_builder.cli.main import main

pytestmark = pytest.mark.triton


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = write_double_repository(tmp_path_factory.mktemp("live_cli") / "repo")
    write_onnx_model(repo, "scale")
    return repo


def test_validate_live_cli_prints_status_per_model_and_json_when_not_quiet(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(repo), "--live", "--no-gpu", "--format", "json", "--load-timeout", "30"]) == 0
    out, err = capsys.readouterr()
    models = {m["name"]: m for m in json.loads(out)["models"]}
    progress = [line for line in err.splitlines() if line.startswith("live: ")]
    expected = [[f"live: loading {name} ...", f"live: {name}: {_progress(m['live'])}"] for name, m in models.items()]
    # A line as each load starts (it may take up to --load-timeout), then its verdict right after.
    assert sorted(zip(progress[::2], progress[1::2], strict=True)) == sorted(tuple(pair) for pair in expected)
    assert models["double"]["live"]["status"] == "loaded" and models["double"]["live"]["proven_by"] == "server"
    assert models["scale"]["live"]["proven_by"] == "stand-in"


def _progress(live: dict) -> str:
    via = " through the ONNX Runtime stand-in" if live["proven_by"] == "stand-in" else ""
    answered = {None: "", True: ", answered a request", False: ", did NOT answer a request"}[live["inferred"]]
    return f"{live['status']}{via}{answered}"


def test_validate_live_cli_prints_no_progress_when_quiet(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(repo), "--live", "--no-gpu", "-q", "--load-timeout", "30"]) == 0
    out, err = capsys.readouterr()
    assert "live:" not in err and "live: loaded" in out  # the text report shows the status
