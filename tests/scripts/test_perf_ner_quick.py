"""scripts/bench/ner.py --quick runs end to end (CI checks that the benchmark runs and agrees, not its speed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.quick_bench import run_quick


@pytest.mark.slow
@pytest.mark.triton
def test_ner_benchmark_writes_every_figure_when_quick(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    results, stdout = run_quick("ner.py", out, "--workdir", str(tmp_path))
    assert results["machine"]["quick"] is True
    by_aggregation = results["postprocessing"]["by_aggregation"]
    assert {"none", "simple", "first", "average", "max", "simple, 83% O tokens"} == set(by_aggregation)
    assert by_aggregation["simple, 83% O tokens"]["entities_per_text"] < by_aggregation["simple"]["entities_per_text"]
    # The served step's entities equal the pipeline's own postprocess on the same logits, for every strategy.
    assert results["figures"]["postprocess_mismatches"] == 0
    assert all(row["ours_ms"] > 0 and row["pipeline_ms"] > 0 for row in by_aggregation.values())
    assert results["served"]["4"]["errors"] == 0 and results["served"]["4"]["items_per_s"] > 0
    assert results["in_process"]["best_texts_per_s"] > 0 and results["figures"]["served_vs_pipeline"] > 0
    assert "## Token classification / NER" in stdout
