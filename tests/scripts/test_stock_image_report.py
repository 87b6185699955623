"""scripts/bench/stock_image.py's pure parts: sizes read from a folder and a dist-info RECORD, and the
BENCHMARKS.md section written from results (no builds, no server: the benchmark itself runs by hand)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "bench"))

from rounds import figure
from stock_image import TITLE, failures, folder_size, markdown, measure_repository, package_bytes


def _write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def _step_with_pillow(version: Path) -> None:
    site = version / "site-packages"
    _write(site / "PIL" / "__init__.py", 100)
    _write(site / "PIL" / "_imaging.so", 900)
    info = site / "pillow-13.0.0.dist-info"
    _write(info / "METADATA", 10)
    # RECORD lists itself without a size; a listed file that is gone counts nothing.
    (info / "RECORD").write_text(
        "PIL/__init__.py,sha256=a,100\nPIL/_imaging.so,sha256=b,900\npillow-13.0.0.dist-info/METADATA,sha256=c,10\n"
        "pillow-13.0.0.dist-info/RECORD,,\nPIL/gone.py,sha256=d,5\n", encoding="utf-8")


def test_package_bytes_sums_the_record_files_present_when_a_step_ships_a_wheel(tmp_path: Path) -> None:
    _step_with_pillow(tmp_path)
    record = (tmp_path / "site-packages" / "pillow-13.0.0.dist-info" / "RECORD").stat().st_size
    assert package_bytes(tmp_path / "site-packages") == {"pillow==13.0.0": 1010 + record}


def test_measure_repository_gives_each_python_step_its_share_when_the_manifest_records_pins(tmp_path: Path) -> None:
    _step_with_pillow(tmp_path / "pre" / "1")
    _write(tmp_path / "pre" / "1" / "model.py", 50)
    _write(tmp_path / "post" / "1" / "model.py", 50)
    _write(tmp_path / "net" / "1" / "model.onnx", 4000)
    (tmp_path / "repo-builder.json").write_text(json.dumps({"target": {"shipped": {"pre": ["Pillow==13.0.0"]}}}), encoding="utf-8")
    measured = measure_repository(tmp_path)
    total, files = folder_size(tmp_path)
    assert (measured["bytes"], measured["files"]) == (total, files)
    steps = {s["step"]: s for s in measured["steps"]}
    assert set(steps) == {"pre", "post"}  # the ONNX model is no Python step
    assert steps["post"]["bytes"] == 0 and steps["post"]["pins"] == {}
    assert steps["pre"]["files"] == 4 and steps["pre"]["pins"]["Pillow==13.0.0"] == package_bytes(tmp_path / "pre" / "1" / "site-packages")["pillow==13.0.0"]


def _results() -> dict[str, Any]:
    step = {"step": "det_preprocess", "version": "1", "bytes": 60_000_000, "files": 300,
            "pins": {"opencv-python-headless==4.10.0.84": 58_000_000, "pillow==13.0.0": 2_000_000}}
    build = {"release": "24.12", "family": "object-detector", "model": "YOLOv8n", "seconds": 9.5, "cold_seconds": None,
             "validation_ok": True, "bytes": 75_000_000, "files": 320, "steps": [step]}
    proof = {"release": "24.12", "family": "object-detector", "verdict": {"exit_code": 0, "problems": []},
             "image": [12.0, 13.0, 12.5], "builder": [10.0, 10.0, 10.0]}
    ratio = [1.2, 1.3, 1.25]
    figures = {"image": figure(proof["image"], None), "builder": figure(proof["builder"], None), "ratio": figure(ratio, None)}
    return {
        "date": "2026-01-01", "quick": False, "rounds": 3, "pythons": {"24.12": "3.12"}, "builds": [build],
        "proofs": {"24.12 object-detector": proof}, "proof_figures": {"rows": {"24.12 object-detector": figures}, "all": figures},
        "cold": [{"release": "24.12", "python": "3.12", "packages": ["numpy==1.26.4"], "venv": {"seconds": 11.0, "bytes": 300_000_000},
                  "standin": {"error": "pip install onnxruntime==1.32.0 for Python 3.12 failed: no network"}}],
        "onnxruntime": {"builder": "1.32.0", "standin": {"24.12": "1.23.2"}},
        "machine": {"cores": 2, "load_before": [1.0, 1.0, 1.0], "load_after": [2.0, 2.0, 2.0], "seconds": 600.0},
    }


def test_markdown_names_the_largest_package_and_the_ratio_when_results_are_given() -> None:
    text = markdown(_results())
    assert text.startswith(f"## {TITLE}")
    assert "| object-detector (YOLOv8n) | `det_preprocess` | opencv-python-headless==4.10.0.84 (58.0 MB), pillow==13.0.0 (2.0 MB) | 60.0 | 300 | 75.0 | 80% |" in text
    assert "largest single package shipped is opencv-python-headless==4.10.0.84 (58.0 MB, 97% of what object-detector ships)" in text
    assert "| 24.12 | object-detector | 12.50 (12.00-13.00) | 10.00 (10.00-10.00) | 1.25x (1.20-1.30) | passes |" in text
    assert "failed: pip install onnxruntime" in text and "| 11.0 | 300.0 |" in text
    assert "stand-in runs onnxruntime 1.23.2 for 24.12 (Python 3.12), not the builder's 1.32.0" in text


def test_failures_lists_a_failed_proof_with_its_error_when_the_image_python_refuses() -> None:
    results = _results()
    results["proofs"]["24.12 object-detector"]["verdict"] = {"exit_code": 1, "problems": ["error RB905 det_preprocess: No module named 'cv2'"]}
    wrong = failures(results)
    assert "proof 24.12 object-detector: error RB905 det_preprocess: No module named 'cv2'" in wrong
    assert any(line.startswith("cold 24.12 standin: pip install onnxruntime") for line in wrong)
    assert "FAILS: error RB905" in markdown(results)
