"""scripts/bench/embeddings.py --quick runs end to end (CI checks that the benchmark runs, not its speed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.quick_bench import run_quick

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "embeddings.py"

pytest.importorskip("sentence_transformers", reason="sentence-transformers (the test extra) is not installed")


@pytest.mark.slow
@pytest.mark.triton
def test_embeddings_benchmark_writes_every_figure_when_quick(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    results, _ = run_quick("embeddings.py", out, "--workdir", str(tmp_path / "work"), timeout=600)
    assert results["machine"]["quick"] is True and results["errors"] == 0
    assert results["encode_best"]["per_s"] > 0 and set(results["encode_per_s_by_batch"]) == {"1", "8", "32"}
    assert all(results["served_per_s"][k] > 0 and results["ratio"][k] > 0 and results["ratio_vs_one_thread"][k] > 0 for k in ("1", "8"))
    assert results["encode_one_thread_best"]["per_s"] > 0
    sys.path.insert(0, str(SCRIPT.parent))
    from embeddings import markdown

    section = markdown(results)
    assert "## Text embeddings" in section and "| encode, batch 32 |" in section and "one thread" in section
