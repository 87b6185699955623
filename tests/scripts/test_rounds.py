"""scripts/bench/rounds.py: a figure's verdict comes from its spread over rounds, never from its median alone."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))

from rounds import figure, machine_load, not_measured, ratios, status_of


def test_status_met_when_the_whole_spread_is_above_the_target() -> None:
    assert status_of([0.91, 0.95, 0.93], 0.9) == "met"
    assert status_of([0.9, 0.95], 0.9) == "met"  # the target itself counts as reached


def test_status_missed_when_the_whole_spread_is_below_the_target() -> None:
    assert status_of([0.80, 0.85, 0.89], 0.9) == "missed"


def test_status_unsettled_when_the_spread_crosses_the_target_even_with_a_median_above_it() -> None:
    assert status_of([0.85, 0.95, 0.96], 0.9) == "unsettled"
    assert status_of([0.85, 0.86, 0.95], 0.9) == "unsettled"


def test_status_for_lower_is_better_figures_mirrors_the_rule() -> None:
    assert status_of([0.01], 0.02, higher_is_better=False, min_rounds=1) == "met"
    assert status_of([0.03, 0.05], 0.02, higher_is_better=False) == "missed"
    assert status_of([0.01, 0.03], 0.02, higher_is_better=False) == "unsettled"


def test_status_unsettled_when_too_few_rounds_to_show_a_spread() -> None:
    assert status_of([5.0], 2.0) == "unsettled"
    assert status_of([5.0], 2.0, min_rounds=1) == "met"


def test_status_not_measured_without_rounds_and_recorded_without_target() -> None:
    assert status_of([], 2.0) == "not-measured"
    assert status_of([1.0, 2.0], None) == "recorded"  # measured, nothing to judge it against


def test_figure_records_rounds_median_spread_and_says_why_one_round_is_unsettled() -> None:
    out = figure([1.0, 3.0, 2.0], 1.5, note="x")
    assert out["value"] == 2.0 and out["spread"] == [1.0, 3.0] and out["rounds"] == [1.0, 3.0, 2.0]
    assert out["status"] == "unsettled" and out["target"] == 1.5 and out["better"] == "higher"
    single = figure([4.0], 2.0, load_generator="python")
    assert single["status"] == "unsettled" and "1 round(s)" in single["note"] and single["load_generator"] == "python"


def test_not_measured_has_no_value_and_keeps_its_reason() -> None:
    out = not_measured(0.9, "perf_analyzer: not installed")
    assert out["value"] is None and out["status"] == "not-measured" and out["note"] == "perf_analyzer: not installed"


def test_ratios_pair_rounds_and_refuse_unequal_series() -> None:
    assert ratios([2.0, 3.0], [1.0, 0.0]) == [2.0, 0.0]
    with pytest.raises(ValueError, match="pair up"):
        ratios([1.0], [1.0, 2.0])


def test_machine_load_reports_three_averages_and_at_least_one_core() -> None:
    load = machine_load()
    assert len(load["loadavg"]) == 3 and load["cores"] >= 1


def test_text_summary_median_lies_within_its_spread_when_one_round_sits_on_a_rounding_edge() -> None:
    from text_preprocess import summary

    # 1.00051 once read: median 1.001, spread [1.0, 1.0] (the figure's 4-place spread rounded again).
    for value in (1 + i / 100_000 for i in range(3000)):
        s = summary([value], target=1.0)
        assert s["spread"][0] <= s["median"] <= s["spread"][1], (value, s)
