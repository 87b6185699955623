"""`repo-builder bench REPO` on the real embedded Triton, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from support.bench_repository import DOUBLE_CONFIG, write_repository
from tritonclient.grpc import model_config_pb2

from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.triton.bench import StepStats, default_models, payloads_for, percentile, slowest_step
from repo_builder.triton.perf_analyzer import ENVIRONMENT


def test_percentile_takes_nearest_rank_when_values_are_few() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([], 0.9) == 0.0


def test_slowest_step_names_most_compute_when_steps_ran() -> None:
    steps = [StepStats("pre", 10, 5, 0.5, 2.0), StepStats("model", 10, 5, 3.0, 9.0), StepStats("idle", 0, 0, 0.0, 0.0)]
    assert slowest_step(steps).model == "model"


def test_default_models_lists_ensembles_when_repository_has_them(tmp_path: Path) -> None:
    assert default_models(write_repository(tmp_path)) == ("pipeline",)


def test_payloads_for_refuses_when_input_is_unknown() -> None:
    config = text_format.Parse(DOUBLE_CONFIG, model_config_pb2.ModelConfig())
    assert payloads_for(config, {})[0]["X"][0].shape == (1, 3)
    with pytest.raises(UserError, match="has no such input"):
        payloads_for(config, {"IMAGE": [b"x"]})


@pytest.mark.parametrize(("args", "message"), [(["--concurrency", "1,x"], "whole numbers"), (["--concurrency", "0"], ">= 1"), (["--input", "nofile"], "NAME=FILE")])
def test_bench_refuses_when_options_are_bad(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main(["bench", str(write_repository(tmp_path)), *args]) == 2
    assert message in capsys.readouterr().err


def test_bench_refuses_when_repository_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(tmp_path / "nothing")]) == 2
    assert "not a folder" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.triton
def test_bench_measures_ensemble_and_names_step_when_served(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "bench.json"
    # A perf_analyzer that cannot start (as the real one here, glibc 2.36): bench falls back and says why.
    monkeypatch.setenv(ENVIRONMENT, str(cannot_start(tmp_path / "perf_analyzer")))
    code = main(["bench", str(write_repository(tmp_path / "repo")), "--concurrency", "1,2", "--seconds", "1", "--warmup", "0.3", "--json", str(out)])
    assert code == 0
    report = json.loads(out.read_text())
    levels = report["models"][0]["levels"]
    assert [level["concurrency"] for level in levels] == [1, 2]
    assert all(level["requests"] > 0 and level["errors"] == 0 for level in levels)
    assert levels[0]["slowest_step"] == "double"
    assert {s["model"] for s in levels[0]["steps"]} == {"pipeline", "double"}
    assert all(level["load_generator"] == "python" for level in levels)
    assert report["settings"]["load_generator"] == "python" and "GLIBC_2.38" in report["settings"]["load_generator_note"]
    captured = capsys.readouterr()
    assert "pipeline (load generator: python)" in captured.out
    assert "load generator: python (perf_analyzer cannot run (exit 1)" in captured.err


def cannot_start(path: Path) -> Path:
    """A file that fails as perf_analyzer's wheel binary fails on glibc 2.36: the loader's message, exit 1."""
    path.write_text("#!/bin/sh\ncat >&2 <<'MSG'\nperf_analyzer: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found\nMSG\nexit 1\n")
    path.chmod(0o755)
    return path


def test_bench_refuses_in_one_line_when_perf_analyzer_is_required_but_cannot_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = cannot_start(tmp_path / "perf_analyzer")
    assert main(["bench", str(write_repository(tmp_path / "repo")), "--load-generator", "perf_analyzer", "--perf-analyzer", str(binary)]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --load-generator perf_analyzer: perf_analyzer cannot run (exit 1)") and len(err.splitlines()) == 1


def test_bench_refuses_in_one_line_when_config_is_over_the_size_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from repo_builder.validate.scan import MAX_CONFIG_BYTES

    repo = write_repository(tmp_path)
    with (repo / "pipeline" / "config.pbtxt").open("r+b") as handle:
        handle.truncate(MAX_CONFIG_BYTES + 1)  # sparse: costs no disk, and bench must not read it
    assert main(["bench", str(repo)]) == 2
    err = capsys.readouterr().err
    assert "config.pbtxt" in err and "over the" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.triton
def test_bench_measures_through_perf_analyzer_when_one_starts_here(tmp_path: Path) -> None:
    """Runs only where $REPO_BUILDER_PERF_ANALYZER starts (scripts/bench/perf_analyzer_251.py sets one up here)."""
    import os

    from repo_builder.triton.perf_analyzer import probe

    binary = os.environ.get(ENVIRONMENT)
    if not binary or probe(Path(binary)):
        pytest.skip(reason=f"${ENVIRONMENT} does not name a perf_analyzer that starts here")
    out = tmp_path / "bench.json"
    code = main(["bench", str(write_repository(tmp_path / "repo")), "--concurrency", "2", "--seconds", "3", "--warmup", "0.3",
                 "--load-generator", "perf_analyzer", "--json", str(out)])
    assert code == 0
    (level,) = json.loads(out.read_text())["models"][0]["levels"]
    assert level["load_generator"] == "perf_analyzer" and level["items_per_s"] > 0 and 0 < level["p50_ms"] <= level["p99_ms"]
    assert {s["model"]: s["requests"] > 0 for s in level["steps"]} == {"pipeline": True, "double": True}
