"""scripts/bench/pipeline.py --quick runs end to end (CI checks that the benchmark runs, not its speed)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "pipeline.py"
FIGURES = ("image_preprocess_ratio", "image_preprocess_ratio_large", "text_preprocess_ratio", "serving_efficiency", "tuned_vs_default")


@pytest.mark.slow
@pytest.mark.triton
def test_pipeline_benchmark_writes_every_figure_when_quick(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", str(out)], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    for name in FIGURES:
        assert results["figures"][name] > 0, name
    assert set(results["accuracy"]) == {"500x375", "1920x1080", "4032x3024"}
    assert all(level["errors"] == 0 for level in results["end_to_end"]["levels"])
    assert results["machine"]["quick"] is True
    # The text profile behind the missed-target explanation: each side's own work, and the served bound.
    assert results["text_profile"]["batch_1"]["ours_ms"] > 0 and results["text_profile"]["batch_1"]["baseline_ms"] > 0
    assert results["figures"]["text_preprocess_ratio_in_process"] > 0 and results["figures"]["text_preprocess_ratio_bound"] > 0
    sys.path.insert(0, str(SCRIPT.parent))
    from pipeline import make_plan
    from report_pipeline import markdown

    section = markdown(results, make_plan(True, results["machine"]["cores"]))
    assert "### Text preprocessing profile" in section and "| 1 |" in section
    # Under 3 minutes on 2 quiet cores; a shared CI machine gets slack, a hang does not.
    assert time.perf_counter() - started < 540
