"""int8 for an image family: photos through the served image preprocessing as calibration, Conv layers
quantized, top-1 agreement measured against fp32 on other photos."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from repo_builder.cli.main import main

PIL = pytest.importorskip("PIL.Image", reason="Pillow (the serve extra) is not installed")


def _photos(folder: Path, count: int, seed: int) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i in range(count):
        coarse = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
        image = PIL.fromarray(coarse, "RGB").resize((160, 120), PIL.Resampling.BICUBIC)
        noisy = np.clip(np.asarray(image, np.int16) + rng.integers(-20, 21, size=(120, 160, 3)), 0, 255).astype(np.uint8)
        buffer = io.BytesIO()
        PIL.fromarray(noisy, "RGB").save(buffer, "JPEG", quality=90)
        (folder / f"photo_{i:03d}.jpg").write_bytes(buffer.getvalue())
    return folder


def test_image_classifier_int8_is_calibrated_on_photos_through_the_served_preprocessing(tmp_path: Path) -> None:
    calibration = _photos(tmp_path / "calibration", 12, seed=1)
    accuracy = _photos(tmp_path / "accuracy", 24, seed=2)
    repo = tmp_path / "repo"
    code = main(["build", "image-classifier", "--model", "torchvision:mobilenet_v3_small", "--weights", "random", "--out", str(repo),
                 "-q", "--precision", "int8", "--calibration-data", str(calibration), "--accuracy-data", str(accuracy),
                 "--min-accuracy", "0"])
    assert code == 0
    manifest = json.loads((repo / "repo-builder.json").read_text())
    record = manifest["models"]["image_classifier_model"]["versions"]["1"]["settings"]["precision"]
    assert record["calibration"]["samples"] == 12 and record["calibration"]["unit"] == "images"
    figures = record["accuracy"]["figures"]
    assert record["accuracy"]["compared"] == 24 and 0.0 <= figures["top1_agreement"] <= 1.0 and 0.0 <= figures["top5_overlap"] <= 1.0
    assert record["quantization"]["quantized_nodes"] > 40  # mobilenet_v3_small's Convs and Gemms
    model = onnx.load(str(repo / "image_classifier_model" / "1" / "model.onnx"))
    produced_by = {o: n.op_type for n in model.graph.node for o in n.output}
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert convs and all(produced_by.get(n.input[0]) == "DequantizeLinear" for n in convs)
