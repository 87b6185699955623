"""The tune report: the confirmation rounds shown, the star explained (what the winner won on, and why it is
off the front when it is), axes spanning the data, and a table of only the knobs that differ."""

from __future__ import annotations

import re
from typing import Any

from support.report_factory import candidate, tune_doc

from repo_builder.report import parse_record, render_page
from repo_builder.report.sections import Chart, build_page


def _entrant(cid: str, rounds: list[float], p99: float) -> dict[str, Any]:
    ordered = sorted(rounds)
    return {"id": cid, "setting": f"setting of {cid}", "items_per_s": rounds, "p99_ms": [p99] * len(rounds),
            "median_items_per_s": ordered[len(ordered) // 2], "median_p99_ms": p99, "concurrency": 4, "kept_budget": True}


def _search(**extra: Any) -> dict[str, Any]:
    """c2 tops the search windows (the whole front); c1 wins the confirmation rounds, c0 is the start."""
    candidates = [
        candidate("c0", 100.0, 10.0, **{"m.instances": 2, "m.threads": 1, "p.instances": 1}),
        candidate("c1", 104.0, 10.5, **{"m.instances": 1, "m.threads": 2, "p.instances": 1}),
        candidate("c2", 110.0, 9.8, **{"m.instances": 3, "m.threads": 1, "p.instances": 1}),
        candidate("c3", 108.0, 10.2, **{"m.instances": 1, "m.threads": 1, "p.instances": 1}),
    ]
    confirmation = {"rounds": 3, "ratio": 1.08, "climb_best_kept": False, "entrants": [
        _entrant("c0", [99.0, 100.0, 101.0], 10.1), _entrant("c2", [103.0, 103.5, 104.0], 9.9), _entrant("c1", [107.0, 108.0, 109.0], 10.3)]}
    fields: dict[str, Any] = {"candidates": candidates, "pareto_front": ["c2"], "winner": "c1", "p99_budget_ms": None,
                              "objective": "throughput", "confirmation": confirmation}
    return tune_doc(**{**fields, **extra})


def _chart(doc: dict[str, Any]) -> Chart:
    return build_page([parse_record(doc, "tune.json", "tune")]).charts[0]


def _ticks(svg: str, axis: str) -> list[float]:
    return [float(t.replace("\u2212", "-")) for t in re.findall(rf'id="chart-1-{axis}tick_\d+">.*?<text[^>]*>([^<]*)</text>', svg, re.S)]


def test_tune_report_stars_the_winner_at_its_confirmation_median_and_says_why_it_is_off_the_front() -> None:
    chart = _chart(_search())
    assert chart.series == 3 and chart.svg is not None  # candidates, front, the finalists' medians
    assert 'id="chart-1-chosen-2"' in chart.svg and 'id="chart-1-chosen-0"' not in chart.svg  # the star on the medians
    assert "c1 median" in chart.svg
    assert "measured again in 3 interleaved round(s)" in chart.caption
    assert "The star marks the winner, c1" in chart.caption and "served the most in those rounds (1.08x" in chart.caption
    assert "c1 is not on the front" in chart.caption and "c2 served more at a lower p99" in chart.caption
    rows = {r[0]: r for r in chart.table.rows}
    assert rows["c1"][5:8] == ("107.0, 108.0, 109.0", "108.0", "10.30") and rows["c1"][-1] == "winner"
    assert rows["c3"][5:8] == ("", "", "")  # not a finalist


def test_tune_report_says_the_start_was_kept_when_the_gain_was_below_the_noise() -> None:
    doc = _search(winner="c0")
    doc["confirmation"].update(kept_start=True, ratio=1.02)
    chart = _chart(doc)
    assert "so the start is kept" in chart.caption and "c0 is not on the front" in chart.caption


def test_tune_report_stars_the_search_point_and_names_what_it_won_on_without_confirmation_rounds() -> None:
    chart = _chart(tune_doc())
    assert chart.svg is not None and 'id="chart-1-chosen-0"' in chart.svg
    assert "The star marks the winner, c2: the most items/s in the search's own windows within the budget" in chart.caption
    assert "not on the front" not in chart.caption  # c2 is on it


def test_tune_report_lists_only_the_knobs_that_differ_and_names_the_shared_ones_once() -> None:
    chart = _chart(_search())
    assert chart.table.headers[1] == "Knobs that differ"
    rows = {r[0]: r for r in chart.table.rows}
    assert rows["c2"][1] == "m.instances=3; m.threads=1"
    assert all("p.instances" not in r[1] for r in chart.table.rows)
    assert "Every candidate sets p.instances=1" in chart.caption


def test_tune_report_axes_span_the_data_not_from_zero() -> None:
    chart = _chart(_search())
    assert chart.svg is not None
    xs, ys = _ticks(chart.svg, "x"), _ticks(chart.svg, "y")
    assert xs and ys
    assert min(ys) > 90 and max(ys) < 120  # items/s 100..110 fill the height
    assert min(xs) > 9 and max(xs) < 11  # p99 9.8..10.5 ms fill the width
    assert "<svg" in render_page(build_page([parse_record(_search(), "tune.json", "tune")]))
