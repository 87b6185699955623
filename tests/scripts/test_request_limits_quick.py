"""scripts/bench/request_limits.py --quick runs end to end (CI checks that the benchmark runs and measures, not the figures)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.quick_bench import run_quick


@pytest.mark.slow
@pytest.mark.triton
def test_request_limits_benchmark_measures_baseline_and_worst_per_family_when_quick(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    results, stdout = run_quick("request_limits.py", out, "--rounds", "3", "--workdir", str(tmp_path))
    assert results["machine"] == {"quick": True, "rounds": 3}
    assert set(results["families"]) == {"txt", "cls"}
    for row in results["families"].values():
        for case in ("baseline", "worst"):
            # Peaks read back from the live server: the step's own stub is found, and is one of several processes.
            assert row[case]["sum_mib"] > row[case]["step_peak_mib"] >= row[case]["step_after_mib"] > 10, row
            assert row[case]["seconds"] > 0
    assert results["families"]["txt"]["worst_items"] == 8 and results["families"]["txt"]["worst_request_bytes"] == 800_000
    assert "| text-classifier | 8 items" in stdout
    # Two 16-megapixel images (estimate over 64 MiB), decoded on two threads: the step hands back what decoding them
    # took (malloc_trim) instead of holding it. Without the trim it held 108 of 158 MiB here: glibc keeps the freed
    # blocks of its per-thread arenas (a single image, unmapped at once when freed, would not show it).
    image = results["families"]["cls"]
    grown = image["worst"]["step_peak_mib"] - image["step_loaded_mib"]
    assert grown > 60 and image["worst"]["step_after_mib"] - image["step_loaded_mib"] < grown / 2, image
