"""`repo-builder bench REPO --json J --report R` on the real embedded Triton: the schema-versioned JSON keeps
today's keys, and the page it writes renders in chromium with the throughput and step charts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.bench_repository import write_repository
from support.headless_chromium import CHECK_CHARTS, find_chromium, render

from repo_builder.cli.main import main
from repo_builder.report import BENCH_KIND, BENCH_SCHEMA_VERSION, BenchRecord, load_record


def test_bench_refuses_before_measuring_when_report_folder_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = write_repository(tmp_path / "repo")
    assert main(["bench", str(repo), "--report", str(tmp_path / "missing" / "r.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --report ") and "does not exist" in err and len(err.splitlines()) == 1


@pytest.mark.slow
@pytest.mark.triton
def test_bench_writes_versioned_json_and_page_when_report_requested(tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "repo")
    json_path, page = tmp_path / "bench.json", tmp_path / "bench.html"
    args = ["bench", str(repo), "--concurrency", "1,2", "--seconds", "1", "--warmup", "0.3", "--json", str(json_path), "--report", str(page)]
    assert main(args) == 0

    doc = json.loads(json_path.read_text())
    assert doc["kind"] == BENCH_KIND and doc["schema_version"] == BENCH_SCHEMA_VERSION
    assert doc["repository"] == str(repo) and doc["server_version"].startswith("2.")
    assert doc["repository_digest"].startswith("sha256:") and doc["machine"]["cores"] >= 1
    settings = doc["settings"]
    assert {k: settings[k] for k in ("concurrency", "seconds", "warmup", "inputs")} == {
        "concurrency": [1, 2], "seconds": 1.0, "warmup": 0.3, "inputs": "synthesized"}
    assert settings["load_generator"] in {"perf_analyzer", "python"}  # which client measured, and why when a fallback
    assert settings["load_generator"] == "perf_analyzer" or settings["load_generator_note"]
    level = doc["models"][0]["levels"][0]
    assert {"items_per_s", "p99_ms", "steps", "slowest_step"} <= set(level)  # today's keys, unchanged
    record = load_record(json_path)
    assert isinstance(record, BenchRecord) and record.models[0].model == "pipeline"

    html = page.read_text()
    assert 'id="chart-1" data-series="1"' in html and 'id="chart-2" data-series="1"' in html
    assert "Slowest step: double" in html or "Slowest step, by concurrency" in html
    binary = find_chromium()
    if binary is None:
        pytest.skip(reason="no chromium to render the page: apt-get install -y chromium")
    rendered = render(binary, page, CHECK_CHARTS, tmp_path / "profile")
    assert rendered.requests == ()
    assert [all(c["drawn"]) for c in rendered.value["charts"]] == [True, True]
