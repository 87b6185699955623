"""scripts/bench/detection.py --quick runs end to end (CI checks that the benchmark runs, not its speed)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.quick_bench import run_quick

pytest.importorskip("ultralytics", reason="needs-ultralytics: the baselines are Ultralytics' own (detect extra)")


@pytest.mark.slow
@pytest.mark.triton
def test_detection_benchmark_writes_every_figure_when_quick(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    started = time.perf_counter()
    results, stdout = run_quick("detection.py", out, "--workdir", str(tmp_path / "work"), timeout=600)
    assert set(results["preprocess"]) == {"640x480/batch1", "640x480/batch8", "1920x1080/batch1", "1920x1080/batch8"}
    assert all(v["ours_ms"] > 0 and v["ultralytics_ms"] > 0 and v["floor_ms"] > 0 for v in results["preprocess"].values())
    # One round when quick: the ratio and the ceiling are exactly Ultralytics' time over ours and over the floor.
    for v in results["preprocess"].values():
        assert v["rounds"] == 1
        assert v["ratio"] == pytest.approx(v["ultralytics_ms"] / v["ours_ms"]) and v["ceiling"] == pytest.approx(v["ultralytics_ms"] / v["floor_ms"])
        assert v["cpu_ceiling"] == pytest.approx(v["cpu_ultralytics_ms"] / v["cpu_floor_ms"]) and v["cpu_ours_ms"] > 0
    decoders = results["decoders"]
    # What the report says: PIL and torchvision give cv2's pixels; a 1/2-scale decode does not, and moves predict's
    # own detections past the reference check's limits (equal counts, 1 px, 1e-3).
    assert [name for name, v in decoders.items() if v["same_pixels"]] == ["cv2.imdecode", "PIL", "torchvision.io.decode_jpeg"]
    assert all(v["ms"] > 0 for v in decoders.values())
    changes = decoders["cv2 IMREAD_REDUCED_COLOR_2"]["predict_changes"]
    assert len(changes) == 2
    assert any(c["count_full"] != c["count_reduced"] or c.get("max_score", 0) > 1e-3 or c.get("max_box_px", 0) > 1 for c in changes)
    post = results["postprocess"]
    assert post["survivors"] == 300 and post["candidates"] > 300 and post["ours_ms"] > 0 and post["onnx_nms_op_ms"] > 0
    assert results["end_to_end"]["served_images_per_s"] > 0 and results["end_to_end"]["predict_images_per_s"] > 0
    assert results["machine"]["quick"] is True
    assert "## Object detection" in stdout and "floor: decode alone" in stdout and "| cv2.imdecode |" in stdout
    assert time.perf_counter() - started < 540
