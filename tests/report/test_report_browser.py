"""The page in a real browser: Debian's chromium, headless, network off. Every chart drew each of its
series, text is readable at the page's width, no request left the page; a screenshot is kept.

Set REPO_BUILDER_ARTIFACTS_DIR to copy the screenshots there (CI artifacts); otherwise their paths under
the test's tmp folder are printed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.headless_chromium import CHECK_CHARTS, Rendered, find_chromium, render
from support.report_factory import bench_doc, failed_level, level, tune_doc

from repo_builder.report import parse_record, write_report

BINARY = find_chromium()
if BINARY is None and os.environ.get("CI"):
    raise RuntimeError("chromium is not installed: .ci/run installs Debian's chromium package for the browser test")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(BINARY is None, reason="no chromium: apt-get install -y chromium")]


def keep_screenshot(rendered: Rendered, path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path.write_bytes(rendered.screenshot)
    target = os.environ.get("REPO_BUILDER_ARTIFACTS_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, Path(target) / path.name)
    with capsys.disabled():
        print(f"\nscreenshot: {path}" + (f" (copied to {target})" if target else ""))


def open_page(html_path: Path, tmp_path: Path) -> Rendered:
    assert BINARY is not None
    return render(BINARY, html_path, CHECK_CHARTS, tmp_path / "profile")


def test_report_page_draws_every_series_offline_when_opened_in_chromium(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    after = bench_doc([
        {"model": "pipeline", "levels": [level(1, 150.0, 9.0, steps=("pre", "net")), level(4, 420.0, 20.0, steps=("pre", "net"))]},
        {"model": "<script>alert(1)</script>", "levels": [level(1, 40.0, 3.0), level(8, 90.0, 14.0)]},
        {"model": "broken", "levels": [failed_level(1)]},
    ])
    records = [parse_record(bench_doc(), "before.json", "before"), parse_record(after, "after.json", "after"), parse_record(tune_doc(), "tune.json", "tune")]
    page = write_report(records, tmp_path / "report.html", budget_ms=30.0)
    rendered = open_page(page, tmp_path)
    keep_screenshot(rendered, tmp_path / "report.png", capsys)

    assert rendered.requests == ()
    found = rendered.value
    charts = {c["id"]: c for c in found["charts"]}
    # throughput (3 curves: before and after pipeline, <script>), a step chart per run's ensemble, the search
    assert [(c["id"], c["series"]) for c in found["charts"]] == [("chart-1", 3), ("chart-2", 2), ("chart-3", 2), ("chart-4", 2)]
    for chart in charts.values():
        assert all(chart["drawn"]), chart
        assert chart["width"] > 0.8 * found["pageWidth"] - 100 and chart["height"] > 200, chart
        assert chart["minTextPx"] >= 9, chart  # the smallest label is still readable at the page's width
    assert found["tables"] == 4 and found["scripts"] == 0
    assert "<script>alert(1)</script>" in found["text"]  # shown as text, never run
    assert "every request to 'broken' failed" in found["text"]
    assert rendered.screenshot.startswith(b"\x89PNG")


def test_browser_check_sees_request_when_page_fetches_something(tmp_path: Path) -> None:
    """The check can fail: a page that asks for an image off the machine is caught, though the proxy blocks it."""
    page = tmp_path / "leaky.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://example.invalid/pixel.png"><p>x</p></body></html>')
    rendered = open_page(page, tmp_path)
    assert rendered.requests == ("http://example.invalid/pixel.png",)


def test_browser_check_sees_missing_series_when_chart_lacks_one(tmp_path: Path) -> None:
    """The check can fail: a chart that says it drew two series but drew one is reported as such."""
    html = write_report([parse_record(bench_doc(), "b.json", "b")], tmp_path / "r.html").read_text()
    broken = tmp_path / "broken.html"
    broken.write_text(html.replace('id="chart-1" data-series="1"', 'id="chart-1" data-series="2"'))
    rendered = open_page(broken, tmp_path)
    assert rendered.value["charts"][0]["drawn"] == [True, False]
