"""scripts/bench/ocr.py --quick runs end to end and writes its per-stage breakdown (CI checks that the benchmark
runs and its figures hang together, not its speed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.quick_bench import run_quick

pytest.importorskip("rapidocr_onnxruntime", reason="needs-rapidocr: the baseline is RapidOCR() (test extra)")


@pytest.mark.slow
@pytest.mark.triton
def test_ocr_benchmark_writes_every_figure_when_quick(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    figures, _ = run_quick("ocr.py", out, "--workdir", str(tmp_path / "work"))
    assert figures["images"] == 2
    rates = [figures[k] for k in ("served_c1_images_per_s", "served_c4_images_per_s", "rapidocr_in_process_images_per_s")]
    assert all(rate > 0 for rate in rates)
    assert figures["ratio_c4"] == pytest.approx(rates[1] / rates[2])
    # The per-stage breakdown: every stage on both sides, the models' stages measured.
    stages = ("decode", "det_pre", "det", "db_post", "crops", "cls_pre", "cls", "rec_pre", "rec", "ctc", "other")
    for side in ("rapidocr", "served_c1", "served_c4"):
        ms = figures[side]["ms_per_image"]
        assert tuple(ms) == stages and all(ms[stage] > 0 for stage in ("decode", "det_pre", "det", "rec")), (side, ms)
        assert 0 < figures[f"{side}_model_share"] <= 1
    for side in ("served_c1", "served_c4"):
        step, models = figures[side]["ms_per_image"], figures[side]["model_compute_ms_per_image"]
        # Triton's count of each model's compute falls inside the step's clock around its BLS call.
        assert all(0 < models[stage] <= step[stage] * 1.01 for stage in ("det", "cls", "rec")), (side, step, models)
    # At concurrency 1 the step's stages fit in the end-to-end time per image.
    assert sum(figures["served_c1"]["ms_per_image"].values()) <= 1000 / rates[0] * 1.01
