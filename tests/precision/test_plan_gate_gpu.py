"""int8 for a TensorRT plan: the gate passes with ONNX Runtime at build time (here), then compile-pending
--accuracy-data builds the plan and runs the gate again against it (a GPU and a tritonserver with the
TensorRT backend: scripts/gpu-check runs the gpu-marked half)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest
from support.sentences import sentences

from repo_builder.cli.main import main
from repo_builder.compile_recipe import RECIPE_FILE, SOURCE_ONNX
from repo_builder.export.tiny_embedder import make_tiny_sentence_transformer
from repo_builder.gpu import gpu_present
from repo_builder.plan_format import tensorrt_available

TRITONSERVER = os.environ.get("REPO_BUILDER_TRITONSERVER")  # one with the TensorRT backend (the release's image)


@pytest.fixture(scope="module")
def deferred(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("plan-gate")
    model = make_tiny_sentence_transformer(root / "st")
    texts = sentences(120)
    (root / "calibration.txt").write_text("\n".join(texts[:40]), encoding="utf-8")
    (root / "accuracy.txt").write_text("\n".join(texts[40:]), encoding="utf-8")
    repo = root / "repo"
    code = main(["build", "text-embedder", "--model", str(model), "--out", str(repo), "-q", "--runtime", "tensorrt",
                 "--defer-compile", "--precision", "int8", "--calibration-data", str(root / "calibration.txt"),
                 "--accuracy-data", str(root / "accuracy.txt"), "--min-accuracy", "0.9", "--fallback", "auto"])
    assert code == 0
    return repo, root / "accuracy.txt"


def test_deferred_int8_recipe_carries_the_gated_qdq_graph_and_no_builder_flags(deferred: tuple[Path, Path]) -> None:
    repo, _ = deferred
    version = repo / "text_embedder_model" / "1"
    recipe = json.loads((version / RECIPE_FILE).read_text())
    assert recipe["settings"]["precision"] == "int8" and recipe["settings"]["precision_flags"] is False
    ops = {n.op_type for n in onnx.load(str(version / SOURCE_ONNX), load_external_data=False).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    manifest = json.loads((repo / "repo-builder.json").read_text())
    assert manifest["models"]["text_embedder_model"]["versions"]["1"]["settings"]["precision"]["accuracy"]["passed"] is True


@pytest.mark.gpu
@pytest.mark.skipif(not (gpu_present() and tensorrt_available() and TRITONSERVER),
                    reason="needs an NVIDIA GPU, TensorRT and REPO_BUILDER_TRITONSERVER (a tritonserver with the TensorRT backend)")
def test_compile_pending_runs_the_gate_again_on_the_plan_when_given_the_accuracy_data(deferred: tuple[Path, Path]) -> None:
    repo, accuracy = deferred
    assert main(["compile-pending", str(repo), "--accuracy-data", str(accuracy), "--tritonserver", str(TRITONSERVER)]) == 0
    manifest = json.loads((repo / "repo-builder.json").read_text())
    served = manifest["models"]["text_embedder_model"]["versions"]["1"]["settings"]["precision"]["served_gate"]
    assert served["passed"] is True and "TensorRT plan" in served["measured_on"] and served["compared"] == 80
