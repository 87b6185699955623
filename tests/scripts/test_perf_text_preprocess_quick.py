"""scripts/bench/text_preprocess.py --quick runs end to end (CI checks that the benchmark runs, not its speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "text_preprocess.py"

pytest.importorskip("onnxruntime_extensions", reason="onnxruntime-extensions (the export extra) is not installed")


@pytest.mark.slow
@pytest.mark.triton
def test_text_preprocess_benchmark_writes_every_figure_when_quick(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["machine"]["quick"] is True and results["errors"] == 0
    for key in ("text_preprocess_ratio", "python_step_ratio", "onnx_vs_python"):
        figure = results[key]
        assert len(figure["rounds"]) == results["machine"]["rounds"] == 2
        assert all(v > 0 for v in figure["rounds"]) and figure["spread"][0] <= figure["median"] <= figure["spread"][1]
        assert isinstance(figure["met"], bool) and isinstance(figure["settled"], bool)
    assert all(results["texts_per_s"][role]["median"] > 0 for role in ("onnx", "python", "pad_512"))
    assert all(results["server_ms_per_text"][role]["median"] > 0 for role in ("onnx", "python", "pad_512"))
    assert results["server_ratio"]["median"] > 0 and results["load_generator"] in ("perf_analyzer", "python")
    assert all(results["in_process"]["ms_per_text"][role]["median"] > 0 for role in ("onnx", "python", "pad_512"))
