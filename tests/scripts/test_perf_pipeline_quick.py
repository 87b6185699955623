"""scripts/bench/pipeline.py --quick runs end to end (CI checks that the benchmark runs, not its speed)."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest
from support.quick_bench import run_quick

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "pipeline.py"
# Issue 23's JSON keys, each in scripts/bench/rounds.py's figure shape.
KEYS = ("text_preprocess_ratio", "serving_efficiency", "tune_vs_model_analyzer", "tune_seconds", "model_analyzer_seconds",
        "dali_mean_abs_diff", "dali_max_abs_diff", "image_preprocess_ratio", "image_preprocess_ratio_large", "tuned_vs_default")
MEASURED_HERE = ("serving_efficiency", "image_preprocess_ratio", "image_preprocess_ratio_large", "tuned_vs_default", "tune_seconds")


@pytest.mark.slow
@pytest.mark.triton
def test_pipeline_benchmark_writes_every_figure_when_quick(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    started = time.perf_counter()
    results, _ = run_quick("pipeline.py", out, timeout=600)
    figures = results["figures"]
    assert set(KEYS) <= set(figures)
    for key in KEYS:
        f = figures[key]
        assert f["status"] in ("met", "missed", "unsettled", "not-measured", "recorded"), key
        assert {"value", "rounds", "spread", "target", "note"} <= set(f), key
        if f["status"] == "not-measured" and f["value"] is None:
            assert f["note"].strip(), f"{key}: not measured without a reason"
    for key in MEASURED_HERE:  # measured by this script on every machine
        assert figures[key]["value"] > 0 and len(figures[key]["rounds"]) >= 1, key
    # One round cannot show a spread: never a verdict from it.
    assert figures["image_preprocess_ratio"]["status"] == "unsettled" and "1 round(s)" in figures["image_preprocess_ratio"]["note"]
    efficiency = figures["serving_efficiency"]
    assert efficiency["load_generator"] in ("perf_analyzer", "python") and efficiency["load"]["cores"] >= 1
    if efficiency["load_generator"] == "python":  # the target is perf_analyzer's: the Python client's figure gets no verdict
        assert efficiency["status"] == "not-measured" and efficiency["fallback_note"]
    # The image floor (a Python step that decodes nothing) is measured beside both sides, and bounds the ratio.
    assert all(f["floor"]["items_per_s"] > 0 and f["floor"]["errors"] == 0 for f in results["image_preprocess"].values())
    assert results["details"]["image_preprocess_ratio_bound_by_size"]["500x375"] > 0
    # So is the decoding floor (that plus the entropy decoding every JPEG decoder does), which bounds the large photos.
    assert all(f["decode_floor"]["items_per_s"] > 0 and f["decode_floor"]["errors"] == 0 for f in results["image_preprocess"].values())
    assert results["details"]["image_preprocess_decode_bound_by_size"]["1920x1080"] > 0
    # And the draft decoding floor (decoding at the scale ours does).
    assert all(f["draft_floor"]["items_per_s"] > 0 and f["draft_floor"]["errors"] == 0 for f in results["image_preprocess"].values())
    assert results["details"]["image_preprocess_draft_bound_by_size"]["1920x1080"] > 0
    # One draft scale less, measured on the large photos only, costs accuracy: the override took effect.
    accuracy = results["accuracy"]
    assert "smaller_draft_max_abs" not in accuracy["500x375"]
    assert all(accuracy[size]["smaller_draft_max_abs"] > accuracy[size]["max_abs"] for size in ("1920x1080", "4032x3024"))
    # Ours resizes with torch (--resize-with torch); the default Pillow step is measured beside it.
    assert all(f["ours_pillow"]["items_per_s"] > 0 and f["ours_pillow"]["errors"] == 0 for f in results["image_preprocess"].values())
    assert results["details"]["image_preprocess_pillow_ratio_by_size"]["500x375"] > 0
    ceiling = results["ceiling"]  # the target's ceiling holds no more images in flight than the served loop of 4
    assert ceiling["best_in_flight"]["streams"] * ceiling["best_in_flight"]["batch"] <= ceiling["in_flight_bound"] == 4
    assert figures["serving_efficiency_unbounded"]["status"] == "recorded" and figures["serving_efficiency_unbounded"]["value"] > 0
    assert figures["tune_vs_model_analyzer"]["value"] is None  # Model Analyzer is never run by this script
    assert set(results["accuracy"]) == {"500x375", "1920x1080", "4032x3024"}
    assert all(level["errors"] == 0 for level in results["end_to_end"]["levels"])
    assert results["machine"]["quick"] is True
    # The text profile behind the missed-target explanation: each side's own work, and the served bound.
    assert results["text_profile"]["batch_1"]["ours_ms"] > 0 and results["text_profile"]["batch_1"]["baseline_ms"] > 0
    assert results["details"]["text_preprocess_ratio_in_process"] > 0 and results["details"]["text_preprocess_ratio_bound"] > 0
    sys.path.insert(0, str(SCRIPT.parent))
    check_text_onnx(results["external"]["text_preprocess"])
    check_dali(results["external"]["dali_preprocess"])
    from pipeline import make_plan
    from report_pipeline import markdown

    section = markdown(results, make_plan(True, results["machine"]["cores"]))
    assert "### Text preprocessing profile" in section and "| 1 |" in section
    assert "floor items/s (bound)" in section and "decodes nothing" in section
    assert "decoding floor items/s (bound)" in section and "only entropy-decodes each JPEG" in section
    assert "draft decoding floor items/s (bound)" in section and "one draft scale less: max" in section
    assert "| `serving_efficiency` |" in section and "**unsettled**" in section and "Load generator:" in section
    # Under 3 minutes on 2 quiet cores (the ONNX text and DALI benchmarks included); a shared CI machine gets slack, a hang does not.
    assert time.perf_counter() - started < 540


def check_text_onnx(external: list) -> None:  # type: ignore[type-arg]
    """scripts/bench/text_preprocess.py as the pipeline ran it (its own --quick is this same call): every figure
    measured, nothing failed. Without onnxruntime-extensions, the reason is kept instead."""
    result, why = external
    if importlib.util.find_spec("onnxruntime_extensions") is None:
        assert result is None and why
        return
    assert result is not None, why
    assert result["machine"]["quick"] is True and result["errors"] == 0, result.get("first_error")
    for key in ("text_preprocess_ratio", "python_step_ratio", "onnx_vs_python", "server_ratio"):
        figure = result[key]
        assert len(figure["rounds"]) == result["machine"]["rounds"] and all(v > 0 for v in figure["rounds"]), key
        assert figure["spread"][0] <= figure["median"] <= figure["spread"][1], key
    assert isinstance(result["text_preprocess_ratio"]["met"], bool)
    for table in ("texts_per_s", "server_ms_per_text"):
        assert all(result[table][role]["median"] > 0 for role in ("onnx", "python", "pad_512")), table
    assert all(result["in_process"]["ms_per_text"][role]["median"] > 0 for role in ("onnx", "python", "pad_512"))
    assert result["load_generator"] in ("perf_analyzer", "python")


def check_dali(external: list) -> None:  # type: ignore[type-arg]
    """scripts/bench/dali_preprocess.py as the pipeline ran it (quick): every family within the limits."""
    result, why = external
    if importlib.util.find_spec("nvidia.dali") is None:
        assert result is None and why
        return
    assert result is not None, why
    from dali_preprocess import MAX_LIMIT, MEAN_LIMIT

    assert set(result["families"]) == {"resnet50", "image-classifier", "object-detector"}
    worst = [fig for family in result["families"].values() for fig in family["sizes"].values()]
    assert result["dali_mean_abs_diff"] == max(f["mean_abs"] for f in worst)
    assert result["dali_max_abs_diff"] == max(f["max_abs"] for f in worst)
    assert result["dali_mean_abs_diff"] <= MEAN_LIMIT and result["dali_max_abs_diff"] <= MAX_LIMIT, result
    assert all(f["shapes_equal"] for f in result["families"]["object-detector"]["sizes"].values())
    assert result["dali_within_limits"] is True
