"""scripts/bench/model_analyzer.py: Model Analyzer's results read right, its best chosen at the budget, its
best rebuilt as a runnable repository, and the tune / Model Analyzer ratio judged by its spread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))

from model_analyzer import (  # noqa: E402
    Measured,
    analyzer_input,
    best_within,
    comparison,
    has_measurements,
    measure,
    original_name,
    parse_results_csv,
    rebuild_best,
    without_preferred_batch_sizes,
)

# Captured here: Model Analyzer 1.58 (quick search, local launch, perf_analyzer 2.51) on the text pipeline.
DEFAULT_ONLY = DATA / "model_analyzer_1.58_default_only.csv"
SEARCHED = DATA / "model_analyzer_1.58_quick_search.csv"


def test_every_row_of_a_captured_results_csv_is_read() -> None:
    rows = parse_results_csv(DEFAULT_ONLY.read_text())
    assert [r.concurrency for r in rows] == [16, 4, 8, 2, 1]
    first = rows[0]
    assert (first.model, first.variant, first.batch) == ("txt", "txt_config_default", 1)
    assert first.composing == ("txt_preprocess_config_default", "txt_model_config_default", "txt_postprocess_config_default")
    assert (first.items_per_s, first.p99_ms) == (1456.0, 18.6)
    assert first.instance_group == "1:CPU,2:CPU,1:CPU"


def test_a_searched_results_csv_has_several_configurations() -> None:
    rows = parse_results_csv(SEARCHED.read_text())
    assert len({r.variant for r in rows}) > 1
    assert all(r.items_per_s > 0 and r.p99_ms > 0 for r in rows)
    best = best_within(rows, 10.0)  # c8 rows serve more, but at p99 12-16 ms
    assert best is not None and (best.variant, best.concurrency, best.items_per_s) == ("txt_config_0", 2, 913.7)
    assert best.composing == ("txt_preprocess_config_0", "txt_model_config_0", "txt_postprocess_config_0")


def test_the_best_is_the_fastest_within_the_p99_budget() -> None:
    rows = parse_results_csv(DEFAULT_ONLY.read_text())
    at_10 = best_within(rows, 10.0)
    assert at_10 is not None and (at_10.concurrency, at_10.items_per_s) == (4, 984.2)
    at_20 = best_within(rows, 20.0)
    assert at_20 is not None and at_20.concurrency == 16
    assert best_within(rows, 6.9) == at_10  # the budget itself is within it
    assert best_within(rows, 1.0) is None


def test_variant_names_map_back_to_the_model() -> None:
    assert original_name("txt_model_config_3") == "txt_model"
    assert original_name("txt_config_default") == "txt"
    with pytest.raises(ValueError, match="not a Model Analyzer variant"):
        original_name("txt_model")


def test_preferred_batch_sizes_are_removed_in_both_spellings_and_nothing_else() -> None:
    ours = 'dynamic_batching {\n  preferred_batch_size: [ 2, 4, 8 ]\n  max_queue_delay_microseconds: 100\n}\n'
    theirs = "dynamic_batching {\n  preferred_batch_size: 2\n  preferred_batch_size: 4\n  max_queue_delay_microseconds: 100\n}\n"
    for text in (ours, theirs):
        assert without_preferred_batch_sizes(text) == "dynamic_batching {\n  max_queue_delay_microseconds: 100\n}\n"


def _repository(root: Path) -> Path:
    for name, body in {"txt": 'name: "txt"\nplatform: "ensemble"\n',
                       "txt_model": 'name: "txt_model"\nbackend: "python"\nmax_batch_size: 8\n'
                                    "dynamic_batching {\n  preferred_batch_size: [ 2, 4, 8 ]\n}\n"}.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text("# code\n")
        (root / name / "config.pbtxt").write_text(body)
    return root


def test_model_analyzer_profiles_a_copy_without_preferred_sizes(tmp_path: Path) -> None:
    original = _repository(tmp_path / "repo")
    copy = analyzer_input(original, tmp_path / "copy")
    assert "preferred_batch_size" not in (copy / "txt_model" / "config.pbtxt").read_text()
    assert "preferred_batch_size" in (original / "txt_model" / "config.pbtxt").read_text()
    assert (copy / "txt_model" / "1" / "model.py").is_file()


def test_the_best_variant_is_rebuilt_under_the_original_names(tmp_path: Path) -> None:
    original = _repository(tmp_path / "repo")
    out = tmp_path / "ma-out"
    (out / "txt_config_3").mkdir(parents=True)
    (out / "txt_config_3" / "config.pbtxt").write_text('name: "txt"\nplatform: "ensemble"\nmax_batch_size: 4\n')
    (out / "txt_model_config_3").mkdir()
    (out / "txt_model_config_3" / "config.pbtxt").write_text(
        'name: "txt_model_config_3"\nmax_batch_size: 4\ninstance_group {\n  count: 3\n  kind: KIND_CPU\n}\n')
    best = Measured("txt", "txt_config_3", ("txt_model_config_3",), 1, 8, 900.0, 8.0, "3:CPU", "4")
    rebuilt = rebuild_best(original, out, best, tmp_path / "best")
    model = (rebuilt / "txt_model" / "config.pbtxt").read_text()
    assert model.startswith('name: "txt_model"\n') and "count: 3" in model
    assert "max_batch_size: 4" in (rebuilt / "txt" / "config.pbtxt").read_text()
    assert (rebuilt / "txt_model" / "1" / "model.py").is_file()
    missing = Measured("txt", "txt_config_9", (), 1, 8, 900.0, 8.0, "", "")
    with pytest.raises(FileNotFoundError, match="txt_config_9"):
        rebuild_best(original, out, missing, tmp_path / "again")


def test_the_ratio_is_tune_over_model_analyzer_per_round_and_judged_by_its_spread() -> None:
    met = comparison([1100.0, 1200.0, 1050.0], [1000.0, 1000.0, 1000.0])
    assert met["rounds"] == [1.1, 1.2, 1.05] and met["value"] == 1.1 and met["status"] == "met" and met["target"] == 1.0
    assert comparison([900.0, 1100.0, 1000.0], [1000.0] * 3)["status"] == "unsettled"
    assert comparison([800.0, 900.0, 950.0], [1000.0] * 3)["status"] == "missed"
    assert comparison([1100.0, 1200.0], [1000.0, 1000.0])["status"] == "unsettled"  # too few rounds for a verdict


def test_the_ratio_is_missed_when_tunes_winner_breaks_the_budget_in_the_rounds_whatever_it_serves() -> None:
    over = comparison([1300.0, 1250.0, 1280.0], [1000.0] * 3, tune_p99_ms=[11.3, 9.8, 11.6], p99_budget_ms=10.0)
    assert over["status"] == "missed" and over["status_by_throughput"] == "met" and "median 11.3 ms" in over["note"]
    kept = comparison([1300.0, 1250.0, 1280.0], [1000.0] * 3, tune_p99_ms=[9.3, 10.4, 9.6], p99_budget_ms=10.0)
    assert kept["status"] == "met" and "status_by_throughput" not in kept  # the median keeps it: one noisy round does not decide


def test_exit_zero_with_rows_is_measured_despite_gpu_warnings() -> None:
    rows = parse_results_csv(DEFAULT_ONLY.read_text())
    assert has_measurements(0, rows)
    assert not has_measurements(0, [])
    assert not has_measurements(1, rows)
    assert not has_measurements(None, rows)


def test_without_model_analyzer_the_result_says_why_and_carries_no_figure(tmp_path: Path) -> None:
    result = measure(tmp_path, perf_analyzer=tmp_path / "pa", ma_venv=tmp_path / "no-venv", model="txt")
    assert "no Model Analyzer venv" in result["skipped"]
    figure = result["tune_vs_model_analyzer"]
    assert figure["status"] == "not-measured" and figure["value"] is None and result["tune_seconds"] is None


# Opt-in (about 9 minutes, most of it Model Analyzer's own search): Model Analyzer lives in a venv of its own
# (numpy 2) and needs perf_analyzer 2.51 on this glibc; both are named by the environment, never guessed.
MA_VENV = Path(os.environ.get("REPO_BUILDER_MA_VENV", "/nonexistent/model-analyzer-venv"))
PERF_ANALYZER = Path(os.environ.get("REPO_BUILDER_PERF_ANALYZER_251", "/nonexistent/perf_analyzer"))


def test_pipeline_takes_the_three_keys_from_a_result_file(tmp_path: Path) -> None:
    from pipeline import load_model_analyzer, model_analyzer_figures

    result = {"repository": "/r", "p99_ms": 10.0, "model_analyzer_seconds": 300.0, "tune_seconds": 280.0,
              "model_analyzer": {"exit_code": 0, "configurations": ["txt_config_default"], "best": None, "load": {}},
              "tune": {"exit_code": 0}, "tune_vs_model_analyzer": comparison([1100.0, 1200.0, 1050.0], [1000.0] * 3)}
    path = tmp_path / "ma.json"
    path.write_text(json.dumps(result))
    loaded, why = load_model_analyzer(path)
    assert loaded == result and why == ""
    figures = model_analyzer_figures(loaded, why, None)
    assert figures["tune_vs_model_analyzer"]["value"] == 1.1 and figures["tune_vs_model_analyzer"]["status"] == "met"
    assert figures["model_analyzer_seconds"]["value"] == 300.0
    assert figures["tune_seconds"]["value"] == 280.0 and figures["tune_seconds"]["status"] == "met"  # within MA's time
    slower = model_analyzer_figures({**result, "tune_seconds": 320.0}, "", None)
    assert slower["tune_seconds"]["status"] == "missed"


def test_pipeline_keeps_null_and_the_reason_without_a_usable_result(tmp_path: Path) -> None:
    from pipeline import load_model_analyzer, model_analyzer_figures

    assert model_analyzer_figures(None, "", None) == {}  # no option given: figures_from's own not-measured stays
    (tmp_path / "other.json").write_text('{"figures": {}}')
    doc, why = load_model_analyzer(tmp_path / "other.json")
    assert doc is None and "not a result of scripts/bench/model_analyzer.py" in why
    figures = model_analyzer_figures(doc, why, None)
    assert figures["tune_vs_model_analyzer"]["value"] is None and figures["tune_vs_model_analyzer"]["note"] == why
    skipped = model_analyzer_figures({"skipped": "no venv", "tune_vs_model_analyzer": None, "model_analyzer_seconds": None}, "", None)
    assert skipped["model_analyzer_seconds"]["note"] == "no venv" and skipped["tune_vs_model_analyzer"]["status"] == "not-measured"


@pytest.mark.slow
@pytest.mark.triton
def test_quick_comparison_measures_both_winners_with_one_load_generator(tmp_path: Path) -> None:
    """--quick end to end on the tests' text pipeline: Model Analyzer searches, tune gets its time, both re-measured."""
    if not (MA_VENV / "bin" / "model-analyzer").is_file():
        pytest.skip(reason=f"no Model Analyzer venv at {MA_VENV} (set REPO_BUILDER_MA_VENV)")
    if not PERF_ANALYZER.is_file():
        pytest.skip(reason=f"no perf_analyzer 2.51 at {PERF_ANALYZER} (scripts/bench/perf_analyzer_251.py DIR)")
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    python = Path(sys.executable)
    make_tiny_text_classifier(tmp_path / "tiny")
    for args in (("export", "text-classifier", "--model", str(tmp_path / "tiny"), "--no-parity", "--out", str(tmp_path / "export")),
                 ("build", "text-classifier", "--from-export", str(tmp_path / "export"), "--name", "txt", "--runtime", "python",
                  "--out", str(tmp_path / "repo"))):
        subprocess.run([str(python), "-m", "repo_builder", *args], check=True, capture_output=True)
    result = measure(tmp_path / "repo", perf_analyzer=PERF_ANALYZER, ma_venv=MA_VENV, model="txt", p99_ms=50.0, quick=True,
                     workdir=tmp_path / "work")
    assert result["model_analyzer"]["measured"], result["model_analyzer"]["problems"]
    assert len(result["model_analyzer"]["configurations"]) > 1  # it searched, not only the default
    assert result["tune"]["exit_code"] == 0 and result["tune_seconds"] > 0
    figure = result["tune_vs_model_analyzer"]
    assert len(figure["rounds"]) == 2 and all(r > 0 for r in figure["rounds"])
    assert all(r["load_generator"] == "perf_analyzer" for side in result["rounds"].values() for r in side)
