"""scripts/bench/nvcf_assets.py --quick runs end to end: both paths answer, every figure is measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.quick_bench import run_quick


@pytest.mark.slow
@pytest.mark.triton
def test_nvcf_benchmark_measures_both_paths_when_quick(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    figures, _ = run_quick("nvcf_assets.py", out)
    assert figures["quick"] is True
    level = figures["summary"]["1"]
    for path in ("in-request", "asset"):
        assert level[path]["p50_ms"] > 0 and level[path]["requests_per_s"] > 0 and level[path]["preprocess_ms"] > 0
    assert level["ratio_p50"] > 0 and level["ratio_preprocess"] > 0
