"""The page: what it states, each chart with its table, partial runs, escaping, nothing to fetch."""

from __future__ import annotations

import re
from typing import Any

from support.report_factory import bench_doc, failed_level, level, tune_doc

from repo_builder.report import parse_record, render_page
from repo_builder.report.sections import build_page


def page_of(*docs: dict[str, Any], labels: tuple[str, ...] = (), budget_ms: float | None = None) -> str:
    names = labels or tuple(f"run{i}" for i in range(len(docs)))
    return render_page(build_page([parse_record(d, f"{n}.json", n) for d, n in zip(docs, names, strict=True)], budget_ms))


def figures(html: str) -> dict[str, int]:
    """chart id -> series the chart says it drew, and check each has its drawn elements in the SVG."""
    found = {m.group(1): int(m.group(2)) for m in re.finditer(r'<figure class="chart" id="([^"]+)" data-series="(\d+)"', html)}
    for chart, series in found.items():
        for index in range(series):
            assert f'id="{chart}-series-{index}' in html, f"{chart} lacks series {index}"
    return found


def rows(html: str, chart: str) -> list[list[str]]:
    table = re.search(rf'<table data-chart="{chart}">(.*?)</table>', html, re.S)
    assert table is not None
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S) if "<td>" in row]


def test_page_states_what_was_measured_when_bench_ran() -> None:
    html = page_of(bench_doc())
    for fact in ("/repos/demo", "sha256:" + "ab" * 32, "tritonserver 2.51.0", "2 cores, no GPU", "2026-11-25T12:00:00+00:00", "concurrency=1,4", "pipeline"):
        assert fact in html


def test_page_draws_throughput_and_step_charts_with_tables_when_ensemble_was_benched() -> None:
    html = page_of(bench_doc())
    assert figures(html) == {"chart-1": 1, "chart-2": 2}  # one curve; two steps stacked
    assert [r[2:5] for r in rows(html, "chart-1")] == [["1", "100.0", "6.00"], ["4", "300.0", "12.50"]]
    assert "Slowest step: net" in html
    assert ["4", "net", "50", "1.00", "0.40", "6.00", "slowest"] in rows(html, "chart-2")
    assert ">c=4<" in html  # each point labelled with its concurrency


def test_page_marks_chosen_within_budget_and_draws_budget_line_when_budget_given() -> None:
    html = page_of(bench_doc(), budget_ms=20.0)
    notes = [r[-1] for r in rows(html, "chart-1")]
    assert notes == ["chosen", "over budget"]
    assert 'id="chart-1-budget"' in html and 'id="chart-1-chosen-0"' in html
    unbounded = page_of(bench_doc())
    assert [r[-1] for r in rows(unbounded, "chart-1")] == ["", "chosen"]


def test_page_overlays_runs_with_their_labels_when_several_files_given() -> None:
    faster = bench_doc([{"model": "pipeline", "levels": [level(1, 150.0, 9.0, steps=("pre", "net")), level(4, 420.0, 20.0, steps=("pre", "net"))]}])
    html = page_of(bench_doc(), faster, labels=("before", "after"))
    assert figures(html)["chart-1"] == 2
    assert "before: pipeline" in html and "after: pipeline" in html
    assert {r[0] for r in rows(html, "chart-1")} == {"before", "after"}


def test_page_says_so_instead_of_blank_chart_when_run_is_empty() -> None:
    html = page_of(bench_doc(models=[]))
    assert "This run measured no model." in html
    assert "No request was answered in any run" in html
    assert "<svg" not in html and "<figure" not in html


def test_page_names_failure_and_draws_the_rest_when_every_request_to_one_model_failed() -> None:
    models = [{"model": "broken", "levels": [failed_level(1), failed_level(4)]}, {"model": "fine", "levels": [level(1, 10.0, 5.0)]}]
    html = page_of(bench_doc(models))
    assert "every request to &#39;broken&#39; failed (first error: model failed: boom)" in html
    assert figures(html) == {"chart-1": 1}
    assert rows(html, "chart-1")[0][3:8] == ["-", "-", "-", "-", "7"]


def test_page_escapes_names_in_html_and_svg_when_model_is_called_script() -> None:
    name = "<script>alert(1)</script>$x$ url(#p1) id=\"y\""
    doc = bench_doc([{"model": name, "levels": [level(1, 10.0, 5.0, steps=("<img src=x onerror=alert(2)>",))]}])
    html = page_of(doc, labels=("<b>run</b>",))
    assert "<script" not in html.lower() and "<img" not in html.lower() and "<b>run" not in html
    svg_text = re.findall(r"<text[^>]*>(.*?)</text>", html, re.S)
    shown = "&lt;script&gt;alert(1)&lt;/script&gt;$x$ url(#p1) id="
    assert any(f'{shown}"y"' in t for t in svg_text)  # legend: as typed (no mathtext, ids left alone in text)
    assert f">{shown}&#34;y&#34;</td>" in html


def test_page_loads_nothing_when_opened() -> None:
    html = page_of(bench_doc(), tune_doc())
    assert not re.search(r"<(script|link|img|iframe|object|embed)\b", html, re.I)
    assert not re.search(r"(src=|@import|url\((?!#))", html, re.I)
    assert not re.search(r'href="(?!#)', html)


def test_page_draws_search_front_and_winner_when_tune_record_given() -> None:
    html = page_of(tune_doc())
    assert figures(html) == {"chart-1": 2}  # candidates, front
    assert 'id="chart-1-chosen-0"' in html and 'id="chart-1-budget"' in html
    table = {r[0]: r for r in rows(html, "chart-1")}
    assert table["c2"][-2:] == ["yes", "winner"] and table["c1"][-2:] == ["", ""]
    assert "preferred_batch_size=4,8" in table["c2"][1]


def test_page_says_nothing_was_measured_when_every_candidate_failed() -> None:
    doc = tune_doc(candidates=[{"id": "c0", "knobs": {}, "items_per_s": 0, "p99_ms": 0, "errors": 3}], pareto_front=[], winner=None)
    html = page_of(doc)
    assert "No candidate was measured without errors" in html and "chose no winner" in html and "<svg" not in html


def test_step_chart_leaves_out_and_names_step_when_no_request_reached_it() -> None:
    doc = bench_doc()
    for lv in doc["models"][0]["levels"]:
        lv["steps"].append({**lv["steps"][1], "model": "fallback", "requests": 0, "queue_ms": 0.0, "compute_ms": 0.0})
    html = page_of(doc)
    assert figures(html)["chart-2"] == 2  # pre and net drawn; fallback has nothing to stack
    assert "Not called in this run: fallback." in html
