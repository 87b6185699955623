"""scripts/bench/pipeline.py's figures: other scripts' results, the load generator's say, and every reason kept."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))

from pipeline import best_within, external_figure, model_analyzer_reason, run_external, serving_figure

from repo_builder.triton.perf_analyzer import LoadGenerator

LOAD = {"before": [1.0, 1.0, 1.0], "after": [2.0, 1.5, 1.0], "cores": 2}
KEYS = ("text_preprocess_ratio", "ratio")


def test_external_figure_says_why_when_the_script_is_absent() -> None:
    result, why = run_external("no_such_bench_script", quick=True)
    assert result is None and why == "scripts/bench/no_such_bench_script.py is not in this tree, so this figure was not measured"
    out = external_figure(result, why, KEYS, 5.0)
    assert out["status"] == "not-measured" and out["value"] is None and out["note"] == why


def test_external_figure_judges_the_rounds_another_script_measured() -> None:
    out = external_figure({"text_preprocess_ratio": {"rounds": [5.5, 6.2, 5.9]}}, "", KEYS, 5.0)
    assert out["status"] == "met" and out["value"] == 5.9 and out["source"] == "text_preprocess_ratio"
    crossing = external_figure({"ratio": [4.8, 5.3]}, "", KEYS, 5.0)
    assert crossing["status"] == "unsettled" and crossing["spread"] == [4.8, 5.3]


def test_external_figure_reads_an_accuracy_as_lower_is_better_from_one_value() -> None:
    assert external_figure({"mean_abs_diff": 0.004}, "", ("dali_mean_abs_diff", "mean_abs_diff"), 0.02, higher_is_better=False, min_rounds=1)["status"] == "met"
    assert external_figure({"max_abs_diff": 0.4}, "", ("max_abs_diff",), 0.25, higher_is_better=False, min_rounds=1)["status"] == "missed"


def test_external_figure_names_the_keys_it_looked_for_when_none_is_there() -> None:
    out = external_figure({"something": 1.0}, "", KEYS, 5.0)
    assert out["status"] == "not-measured" and "text_preprocess_ratio, ratio" in out["note"] and "something" in out["note"]


def test_serving_efficiency_gets_no_verdict_from_the_python_client_even_above_target() -> None:
    efficiency = {"rounds": [0.95, 0.97], "load_generator": "python", "note": "perf_analyzer: not installed"}
    out = serving_figure(efficiency, LOAD)
    assert out["status"] == "not-measured" and out["python_client_status"] == "met" and out["value"] == 0.96
    assert out["fallback_note"] == "perf_analyzer: not installed" and out["load"] == LOAD and "Python gRPC client" in out["note"]


def test_serving_efficiency_is_judged_when_perf_analyzer_measured_it() -> None:
    out = serving_figure({"rounds": [0.91, 0.93], "load_generator": "perf_analyzer", "note": ""}, LOAD)
    assert out["status"] == "met" and "python_client_status" not in out


def test_model_analyzer_reason_carries_perf_analyzers_own_error() -> None:
    note = "perf_analyzer cannot run (exit 1): version `GLIBC_2.38' not found; measured with the Python gRPC client instead"
    reason = model_analyzer_reason(LoadGenerator("python", note=note))
    assert "GLIBC_2.38" in reason and "measured with the Python" not in reason and "model_analyzer.py" in reason


def test_best_within_keeps_the_ceiling_to_the_served_loads_images_in_flight() -> None:
    grid = [{"streams": 2, "threads": 2, "batch": 8, "items_per_s": 20.0}, {"streams": 2, "threads": 1, "batch": 2, "items_per_s": 17.0},
            {"streams": 4, "threads": 1, "batch": 1, "items_per_s": 16.0}, {"streams": 1, "threads": 2, "batch": 1, "items_per_s": 12.0}]
    assert best_within(grid, None)["items_per_s"] == 20.0
    assert best_within(grid, 4)["items_per_s"] == 17.0
    assert best_within(grid, 1)["items_per_s"] == 12.0
    assert best_within(grid[:1], 4)["items_per_s"] == 20.0  # none small enough: the grid's best, not an empty answer


def test_model_analyzer_section_counts_the_rounds_each_side_broke_the_budget_in() -> None:
    from report_pipeline import _model_analyzer_section

    rounds = {"model_analyzer": [{"items_per_s": 100.0, "p99_ms": 6.0}, {"items_per_s": 90.0, "p99_ms": 7.0}],
              "tune": [{"items_per_s": 120.0, "p99_ms": 9.0}, {"items_per_s": 110.0, "p99_ms": 11.5}, {"items_per_s": 115.0, "p99_ms": 9.5}]}
    best = {"variant": "txt_config_3", "instance_group": "2:CPU,1:CPU,1:CPU", "max_batch_size": "2,2,2", "concurrency": 8}
    result = {"p99_ms": 10.0, "rounds": rounds, "model_analyzer": {"best": best}, "tune": {"concurrency": 12, "winner": {"knobs": {}}}}
    results = {"external": {"model_analyzer": (result, "")}, "figures": {"tune_vs_model_analyzer": {"note": ""}}}
    section = "\n".join(_model_analyzer_section(results))
    assert section.startswith("### tune vs Model Analyzer") and "txt_config_3" in section and "at concurrency 12" in section
    assert "model analyzer: median p99 6.5 ms, 0 of 2 rounds over the budget" in section
    assert "tune: median p99 9.5 ms, 1 of 3 rounds over the budget" in section
    assert _model_analyzer_section({"external": {"model_analyzer": (None, "not run")}}) == []


def _size(ours: float, baseline: float, decode_floor: float) -> dict:  # type: ignore[type-arg]
    return {"ours": {"items_per_s": ours, "item_ms": 10.0}, "baseline": {"items_per_s": baseline, "item_ms": 20.0},
            "floor": {"items_per_s": 700.0, "item_ms": 1.0}, "decode_floor": {"items_per_s": decode_floor, "item_ms": 8.0}}


def test_large_photo_explanation_reads_the_decoding_floor_of_each_size() -> None:
    from report_pipeline import _large_why

    figures = {"image_preprocess_ratio_large": {"target": 5.0}}
    sizes = {"500x375": _size(500.0, 250.0, 900.0), "1920x1080": _size(180.0, 40.0, 240.0), "4032x3024": _size(44.0, 7.0, 30.0)}
    why = _large_why({"image_preprocess": sizes, "figures": figures})
    assert "1920x1080: the decoding floor serves 240 items/s" in why and "6.00x the published example's 40.0, ours serves 75% of it" in why
    assert "4032x3024: the decoding floor serves 30 items/s" in why and "4.29x the published example's 7.0, below 5x: the entropy decoding is the wall" in why
    assert "500x375" not in why.split(" Draft mode")[0] and " Draft mode cuts the IDCT" in why
    # Without the decoding floor measured, the fixed explanation stays.
    del sizes["1920x1080"]["decode_floor"], sizes["4032x3024"]["decode_floor"]
    assert _large_why({"image_preprocess": sizes, "figures": figures}).startswith("Large photos: draft mode")


def test_image_explanations_show_the_default_pillow_step_beside_ours_when_measured() -> None:
    from report_pipeline import _decoded, _large_why, _preprocessing

    sizes = {"500x375": _size(500.0, 250.0, 900.0), "1920x1080": _size(180.0, 40.0, 240.0)}
    sizes["500x375"]["ours_pillow"] = {"items_per_s": 450.0, "item_ms": 11.0}
    sizes["1920x1080"]["ours_pillow"] = {"items_per_s": 160.0, "item_ms": 11.0}
    assert "The default step, which resizes with Pillow" in _decoded(sizes["500x375"]) and "1.80x the example" in _decoded(sizes["500x375"])
    why = _large_why({"image_preprocess": sizes, "figures": {"image_preprocess_ratio_large": {"target": 5.0}}})
    assert "ours 180.0 (10.00 ms), the default Pillow step 4.00x" in why
    text = {"ours": {"items_per_s": 1.0, "item_ms": 1.0}, "baseline": {"items_per_s": 1.0, "item_ms": 1.0}, "ratio": 1.0, "compute_ratio": 1.0}
    for f in sizes.values():
        f.update(ratio=1.0, compute_ratio=1.0)
    table = "\n".join(_preprocessing({"image_preprocess": sizes, "text_preprocess": text}))
    assert "| 450 (1.80x) |" in table and "| 160 (4.00x) |" in table
    del sizes["500x375"]["ours_pillow"]  # an older result file: no Pillow column, no sentence
    assert "Pillow" not in _decoded(sizes["500x375"])
