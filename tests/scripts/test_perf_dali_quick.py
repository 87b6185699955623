"""scripts/bench/dali_preprocess.py --quick: the DALI pipelines (CPU flavour) within the preprocessing limits
against torchvision's transforms and the detector's letterbox step, with the keys the pipeline benchmark reads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("nvidia.dali", reason="needs the dali extra (nvidia-dali-cuda120)")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))


@pytest.mark.slow
def test_perf_dali_quick_within_limits_for_every_family() -> None:
    from dali_preprocess import MAX_LIMIT, MEAN_LIMIT, measure

    result = measure(quick=True)
    assert set(result["families"]) == {"resnet50", "image-classifier", "object-detector"}
    worst = [fig for family in result["families"].values() for fig in family["sizes"].values()]
    assert result["dali_mean_abs_diff"] == max(f["mean_abs"] for f in worst)
    assert result["dali_max_abs_diff"] == max(f["max_abs"] for f in worst)
    assert result["dali_mean_abs_diff"] <= MEAN_LIMIT and result["dali_max_abs_diff"] <= MAX_LIMIT, result
    assert all(f["shapes_equal"] for f in result["families"]["object-detector"]["sizes"].values())
    assert result["dali_within_limits"] is True
