"""``repo-builder tune`` end to end on the embedded Triton: a built text classifier is searched, the record
is what ``repo-builder report`` reads, --dry-run leaves the repository alone, and the winner is written
through the validated writer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from repo_builder.cli.main import main
from repo_builder.report import parse_record
from repo_builder.report.records import TuneRecord
from repo_builder.tune.commit import write_winner
from repo_builder.tune.knobs import StepKnobs, current_knobs, setting_of
from repo_builder.tune.runner import tunable_steps
from repo_builder.validate.engine import validate_repository

pytestmark = [pytest.mark.triton, pytest.mark.slow]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.tiny_models import make_tiny_text_classifier  # torch: only this fixture needs it

    root = tmp_path_factory.mktemp("tune")
    model = make_tiny_text_classifier(root / "tiny-bert", num_labels=2, seed=0)
    repo = root / "repo"
    code = main(["build", "text-classifier", "--model", str(model), "--runtime", "python", "--out", str(repo),
                 "--skip-parity", "--name", "t", "-q"])
    assert code == 0
    return repo


def _files(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def test_tune_dry_run_writes_record_report_reads_and_leaves_repository_unchanged(built: Path, tmp_path: Path) -> None:
    before = _files(built)
    record, page = tmp_path / "tune.json", tmp_path / "tune.html"
    code = main(["tune", str(built), "--seconds", "0.5", "--warmup", "0.2", "--max-candidates", "3",
                 "--confirm-rounds", "1", "--dry-run", "--json", str(record), "--report", str(page), "-q"])
    assert code == 0
    assert _files(built) == before
    html = page.read_text()
    assert "Tune search:" in html and "Pareto front" in html and "<svg" in html
    doc = json.loads(record.read_text())
    parsed = parse_record(doc, str(record), "tune")
    assert isinstance(parsed, TuneRecord)
    assert len(parsed.candidates) == 3 and parsed.winner in {c.id for c in parsed.candidates}
    assert all(c.items_per_s > 0 and c.errors == 0 for c in parsed.candidates)  # every candidate really served
    # The finalists (start, climb's best, runner-up) were measured again, one round each; the winner is one of them.
    entrants = doc["confirmation"]["entrants"]
    assert len(entrants) == 3 and all(len(e["items_per_s"]) == 1 and e["items_per_s"][0] > 0 for e in entrants)
    assert doc["candidates"][0]["knobs"]["t_model.instances"] == current_knobs(
        tunable_steps(built, "t")["t_model"]).instances


def test_tune_measures_with_the_python_client_from_where_perf_analyzer_fails(built: Path, tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # Starts (answers --version), then fails every measurement: the search goes on with the Python client.
    fake = tmp_path / "perf_analyzer"
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo 2.51.0; exit 0; }\necho "no measurement" >&2\nexit 3\n')
    fake.chmod(0o755)
    record = tmp_path / "tune.json"
    code = main(["tune", str(built), "--seconds", "0.5", "--warmup", "0.2", "--max-candidates", "2", "--confirm-rounds", "0",
                 "--dry-run", "--load-generator", "perf_analyzer", "--perf-analyzer", str(fake), "--json", str(record)])
    assert code == 0
    doc = json.loads(record.read_text())
    assert doc["settings"]["load_generator"] == "python"
    assert "perf_analyzer failed mid-search" in doc["settings"]["load_generator_note"] and "exit 3" in doc["settings"]["load_generator_note"]
    assert all(c["items_per_s"] > 0 and c["errors"] == 0 for c in doc["candidates"])
    assert "load generator: python" in capsys.readouterr().out


def test_tune_reports_the_load_its_winner_takes_within_the_budget(built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = tmp_path / "tune.json"
    code = main(["tune", str(built), "--seconds", "0.5", "--warmup", "0.2", "--max-candidates", "2", "--confirm-rounds", "0",
                 "--p99-ms", "60000", "--concurrency", "2", "--max-concurrency", "4", "--dry-run", "--load-generator", "python",
                 "--json", str(record)])
    assert code == 0
    doc = json.loads(record.read_text())
    first, second = doc["candidates"][:2]
    assert [p["concurrency"] for p in first["load_points"]] == [2, 4] and first["concurrency"] in (2, 4)
    # The next setting starts at the load the best so far took: it is never tried below it when that keeps the budget.
    assert [p["concurrency"] for p in second["load_points"]] == ([4] if first["concurrency"] == 4 else [2, 4])
    point = doc["operating_point"]
    winner = next(c for c in doc["candidates"] if c["id"] == doc["winner"])
    assert point["concurrency"] == winner["concurrency"] and point["points"][0]["concurrency"] in (2, 4)
    assert all(p["items_per_s"] > 0 and p["errors"] == 0 for p in point["points"])
    assert f"at concurrency {point['concurrency']}" in capsys.readouterr().out


def test_tune_refuses_with_one_line_when_model_is_not_an_ensemble(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", str(built), "--model", "t_model", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "'t_model' is not an ensemble" in err and "Traceback" not in err


def test_write_winner_writes_validated_configs_only_for_changed_steps(built: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(built, repo)
    configs = tunable_steps(repo, "t")
    start = setting_of({n: current_knobs(c) for n, c in configs.items()})
    assert write_winner(repo, configs, start, start) == []
    winner = setting_of({**dict(start), "t_preprocess": StepKnobs(3, None, dict(start)["t_preprocess"].queue_delay_us)})
    before = (repo / "t_model" / "config.pbtxt").read_bytes()
    built_text = (repo / "t_preprocess" / "config.pbtxt").read_text()
    assert write_winner(repo, configs, winner, start) == ["t_preprocess"]
    text = (repo / "t_preprocess" / "config.pbtxt").read_text()
    changed = [a for a, b in zip(built_text.splitlines(), text.splitlines(), strict=True) if a != b]  # edited in place
    assert [line.strip() for line in changed] == [f"count: {dict(start)['t_preprocess'].instances}"]
    assert text_format.Parse(text, model_config_pb2.ModelConfig()).instance_group[0].count == 3
    assert (repo / "t_model" / "config.pbtxt").read_bytes() == before
    assert validate_repository(repo).ok
