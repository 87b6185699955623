"""Validate stays near-linear and its output bounded whatever the input's shape (issue 20): positions come
from one index per config text, lists in messages are capped, hints never tell a folder to rename itself."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from support.validate_repo_helpers import codes, make_model, messages, onnx_bytes, validate

from repo_builder.validate.analysis.bounded import bounded_text, name_list
from repo_builder.validate.analysis.positions import finding_position
from repo_builder.validate.engine import check_repository
from repo_builder.validate.location import cycle_collector_paused
from repo_builder.validate.reporters import render_report
from repo_builder.validate.scan import scan_repository

MODEL_PY = "class TritonPythonModel:\n    def execute(self, requests):\n        return requests\n"


def _entries_repository(root: Path, n: int, quote: str) -> Path:
    """One Python model whose config repeats ``input [ { name: 'x' } ]`` n times: ~3 findings per entry."""
    entries = "\n".join(f"input [ {{ name: {quote}x{quote} }} ]" for _ in range(n))
    make_model(root, "m", f'name: "m"\nbackend: "python"\n{entries}\n', {1: {"model.py": MODEL_PY}})
    return root


def _seconds(root: Path) -> float:
    """Best of three runs of scan + rules + text report, as the CLI runs them (cycle collector paused);
    the machine is shared, so the best run is the cost."""
    best = float("inf")
    for _ in range(3):
        with cycle_collector_paused():
            started = time.process_time()  # CPU time: other jobs on a shared machine do not count
            report = check_repository(scan_repository(root))
            render_report(report, "text")
            best = min(best, time.process_time() - started)
    return best


@pytest.mark.slow
@pytest.mark.parametrize("quote", ["'", '"'])
def test_validate_time_grows_linearly_when_config_entries_double(quote: str, tmp_path: Path) -> None:
    sizes = [1000, 2000, 4000, 8000, 16000]
    times = [_seconds(_entries_repository(tmp_path / str(n), n, quote)) for n in sizes]
    floor = 0.1  # below this, warm-up (allocator growth, first regex use) decides the ratio, not the input size
    ratios = [max(b, floor) / max(a, floor) for a, b in itertools.pairwise(times)]
    assert all(r < 3 for r in ratios), list(zip(sizes, times, strict=True))


def test_finding_position_finds_single_quoted_name_when_config_uses_them() -> None:
    text = "name: 'm'\ninput [\n  { name: 'x' data_type: TYPE_FP32 }\n]\n"
    assert finding_position(text, "model input 'x' must specify 'dims'", "input") == (3, 5)


def test_name_list_counts_the_rest_when_names_are_many() -> None:
    shown = name_list(f"in_{i}" for i in range(1_000_000))
    assert shown.endswith("... and 999,990 more") and shown.count(",") == 9 + 1  # 9 separators + the thousands
    assert len(shown) < 200
    assert name_list([]) == "(none)" and name_list(["a", "b"]) == "a, b"


def test_onnx_hint_is_bounded_when_graph_has_thousands_of_inputs(tmp_path: Path) -> None:
    n = 5000
    graph = onnx_bytes([(f"input_{i:05d}", "FLOAT", [4]) for i in range(n)], [("y", "FLOAT", [4])])
    config = (
        'name: "wide"\nbackend: "onnxruntime"\nmax_batch_size: 0\n'
        'input [{ name: "nope" data_type: TYPE_FP32 dims: [4] }]\noutput [{ name: "y" data_type: TYPE_FP32 dims: [4] }]\n'
    )
    make_model(tmp_path, "wide", config, {1: {"model.onnx": graph}})
    report = validate(tmp_path)
    assert "RB603" in codes(report) or "RB602" in codes(report)
    texts = [d.message + (d.hint or "") for d in report.diagnostics if d.code in ("RB602", "RB603")]
    assert texts and all(len(t) < 1000 for t in texts), [len(t) for t in texts]
    assert any(f"and {n - 10:,} more" in t for t in texts)


@pytest.mark.parametrize(
    ("folder", "unwanted", "wanted"),
    [
        ("99999999999999999999", "rename it to '99999999999999999999'", "64-bit"),
        ("0099999999999999999999", "rename it to '99999999999999999999'", "64-bit"),
        ("007", None, "rename it to '7'"),
    ],
)
def test_version_hint_never_names_the_folder_itself_when_number_is_too_big(
    folder: str, unwanted: str | None, wanted: str, tmp_path: Path
) -> None:
    make_model(tmp_path, "m", 'name: "m"\nbackend: "python"\n', {1: {"model.py": MODEL_PY}, folder: {"model.py": MODEL_PY}})
    report = validate(tmp_path)
    hints = [d.hint or "" for d in report.diagnostics if d.code == "RB107"]
    assert hints, messages(report, "RB107")
    assert any(wanted in h for h in hints), hints
    assert unwanted is None or not any(unwanted in h for h in hints), hints


def test_hint_is_cut_when_it_quotes_something_huge(tmp_path: Path) -> None:
    # No version folder that loads; twelve ignored ones with 200-character names: RB110's hint quotes them.
    folders = {f"v{i:02d}" + "x" * 197: {"model.py": MODEL_PY} for i in range(12)}
    make_model(tmp_path, "m", 'name: "m"\nbackend: "python"\n', folders)
    hints = [d.hint or "" for d in validate(tmp_path).diagnostics if d.code == "RB110"]
    assert hints and all(len(h) <= 1100 for h in hints), [len(h) for h in hints]
    assert any("more characters)" in h for h in hints)
    assert bounded_text("x" * 5000, 1000) == "x" * 1000 + " ... (4,000 more characters)"
    assert bounded_text("short") == "short" and bounded_text(None) is None
