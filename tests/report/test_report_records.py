"""Reading result files: the two kinds and their schema versions, and one-line errors naming file and key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.report_factory import bench_doc, candidate, level, tune_doc, write

from repo_builder.errors import UserError
from repo_builder.report import BenchRecord, TuneRecord, load_record, parse_record
from repo_builder.report.records import pareto_front


def test_load_record_reads_bench_figures_when_file_is_bench_json(tmp_path: Path) -> None:
    record = load_record(write(tmp_path / "run.json", bench_doc()))
    assert isinstance(record, BenchRecord)
    assert record.label == "run.json"
    assert record.info.server_version == "2.51.0" and record.info.cores == 2 and record.info.gpus == ()
    levels = record.models[0].levels
    assert [(lv.concurrency, lv.items_per_s, lv.p99_ms) for lv in levels] == [(1, 100.0, 12.0), (4, 300.0, 25.0)]
    assert [s.model for s in levels[1].steps] == ["ensemble", "pre", "net"]
    assert levels[1].slowest_step == "net"
    assert ("concurrency", "1,4") in record.info.settings


def test_load_record_reads_candidates_front_and_winner_when_file_is_tune_record(tmp_path: Path) -> None:
    record = load_record(write(tmp_path / "tune.json", tune_doc()), "search")
    assert isinstance(record, TuneRecord)
    assert record.label == "search" and record.winner == "c2" and record.p99_budget_ms == 30.0
    assert record.pareto_front == ("c0", "c2", "c4")
    assert dict(record.candidates[2].knobs)["preferred_batch_size"] == "4,8"


@pytest.mark.parametrize(
    ("change", "key", "says"),
    [
        ({"kind": "repo-builder.validate"}, "'kind'", "repo-builder.bench"),
        ({"kind": None}, "'kind'", "expected"),
        ({"schema_version": 2}, "'schema_version'", "version 1"),
        ({"models": {}}, "'models'", "must be a list"),
        ({"models": [{"model": "m", "levels": [{**level(1, 1.0, 1.0), "p99_ms": "fast"}]}]}, "'models[0].levels[0].p99_ms'", "number"),
        ({"models": [{"model": "m", "levels": [{**level(1, 1.0, 1.0), "p99_ms": -1}]}]}, "'models[0].levels[0].p99_ms'", ">= 0"),
        ({"models": [{"model": "m", "levels": [{**level(1, 1.0, 1.0), "concurrency": 0}]}]}, "'models[0].levels[0].concurrency'", ">= 1"),
        ({"models": [{"levels": []}]}, "'models[0].model'", "missing"),
        ({"machine": {"cores": "two"}}, "'machine.cores'", "whole number"),
        ({"settings": {"seconds": {"a": 1}}}, "'settings.seconds'", "number, string"),
    ],
)
def test_parse_record_names_file_and_key_when_bench_json_is_wrong(change: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_record({**bench_doc(), **change}, "runs/a.json", "a")
    message = str(caught.value)
    assert message.startswith("runs/a.json: key ") and key in message and says in message
    assert "\n" not in message


def test_parse_record_refuses_when_bench_json_has_no_kind() -> None:
    old = {"repository": "r", "models": []}  # what bench wrote before the schema version
    with pytest.raises(UserError, match=r"^old.json: key 'kind' is missing"):
        parse_record(old, "old.json", "old")


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"pareto_front": ["c0", "c1", "c2", "c4"]}, "'pareto_front'"),  # c1 is dominated by c0
        ({"pareto_front": ["c0", "zz"]}, "'pareto_front[1]'"),
        ({"winner": "c9"}, "'winner'"),
        ({"objective": "fastest"}, "'objective'"),
        ({"candidates": [candidate("c0", 1.0, 1.0), candidate("c0", 2.0, 2.0)], "pareto_front": ["c0"], "winner": "c0"}, "'candidates'"),
        ({"candidates": [{**candidate("c0", 1.0, 1.0), "knobs": {"threads": [[1]]}}], "pareto_front": ["c0"]}, "'candidates[0].knobs.threads'"),
    ],
)
def test_parse_record_names_key_when_tune_record_is_wrong(change: dict[str, Any], key: str) -> None:
    with pytest.raises(UserError, match=r"^t.json: key ") as caught:
        parse_record({**tune_doc(), **change}, "t.json", "t")
    assert key in str(caught.value)


def test_pareto_front_keeps_only_undominated_error_free_candidates_when_some_trade_off() -> None:
    record = parse_record(tune_doc(), "t.json", "t")
    assert pareto_front(record.candidates) == ("c0", "c2", "c4")
    failing = parse_record({**tune_doc(), "candidates": [*tune_doc()["candidates"], candidate("c5", 900.0, 1.0, errors=3)]}, "t.json", "t")
    assert pareto_front(failing.candidates) == ("c0", "c2", "c4")  # c5 would dominate all, but it dropped requests


@pytest.mark.parametrize(
    ("content", "says"),
    [(b"{not json", "not JSON"), (b"\xff\xfe\x00", "not UTF-8"), (b"[1, 2]", "must be an object")],
)
def test_load_record_refuses_in_one_line_when_file_is_not_a_record(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(UserError, match=says) as caught:
        load_record(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_load_record_refuses_when_file_is_missing(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read it"):
        load_record(tmp_path / "nothing.json")


def test_parse_record_accepts_json_round_trip_when_written_by_bench_document(tmp_path: Path) -> None:
    from repo_builder.report import bench_document

    repo = tmp_path / "repo"
    (repo / "m" / "1" / "__pycache__").mkdir(parents=True)
    (repo / "m" / "config.pbtxt").write_text('name: "m"')
    doc = bench_document(repo, bench_doc()["models"], settings={"concurrency": [1, 4]}, server_version="2.51.0")
    record = parse_record(json.loads(json.dumps(doc)), "b.json", "b")
    assert record.info.repository_digest.startswith("sha256:") and len(record.info.repository_digest) == 71
    before = record.info.repository_digest
    (repo / "m" / "1" / "__pycache__" / "x.pyc").write_bytes(b"stub cache")  # the stub's cache: not the repository
    assert bench_document(repo, [], settings={}, server_version="")["repository_digest"] == before
    (repo / "m" / "config.pbtxt").write_text('name: "m" ')
    assert bench_document(repo, [], settings={}, server_version="")["repository_digest"] != before


def test_load_record_refuses_without_reading_when_path_is_a_fifo_or_device(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # reading it would block forever
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    for path in (fifo, link):
        with pytest.raises(UserError, match="not a regular file"):
            load_record(path)


def test_tune_document_computes_front_and_reads_back_when_tune_records_a_search(tmp_path: Path) -> None:
    from repo_builder.report import tune_document

    (tmp_path / "repo" / "m").mkdir(parents=True)
    candidates = tune_doc()["candidates"]
    doc = tune_document(tmp_path / "repo", "pipeline", candidates, winner="c2", p99_budget_ms=30.0, settings={"concurrency": 4}, server_version="2.51.0")
    assert doc["pareto_front"] == ["c0", "c2", "c4"] and doc["objective"] == "p99-budget"
    record = parse_record(json.loads(json.dumps(doc)), "t.json", "t")
    assert isinstance(record, TuneRecord) and record.winner == "c2"
    with pytest.raises(UserError, match=r"key 'candidates\[1\].p99_ms'"):
        tune_document(tmp_path / "repo", "pipeline", [candidates[0], {**candidates[1], "p99_ms": "slow"}], winner=None, p99_budget_ms=None, settings={}, server_version="")
