"""A text-embedder repository served by `repo-builder serve` answers clients as SentenceTransformer.encode does."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.process_output import read_until, stop_if_running

from repo_builder.cli.main import main
from repo_builder.export.tiny_embedder import make_tiny_sentence_transformer
from repo_builder.pipelines.text_embedding import sentence_transformer

pytest.importorskip("sentence_transformers")
pytestmark = pytest.mark.triton



def test_serve_answers_like_sentence_transformers_when_embedder_repository_served(tmp_path: Path) -> None:
    model = make_tiny_sentence_transformer(tmp_path / "st", pooling="cls", max_seq_length=16)
    repo = tmp_path / "repo"
    assert main(["build", "text-embedder", "--model", str(model), "--out", str(repo), "--runtime", "python", "-q"]) == 0
    proc = subprocess.Popen([sys.executable, "-m", "repo_builder", "serve", str(repo)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out = read_until(proc, "log ", timeout=180)
        assert re.search(r"^text_embedder\s+1\s+READY", out, re.M), out
        port = re.search(r"^gRPC\s+127\.0\.0\.1:(\d+)$", out, re.M)
        assert port is not None, out
        from repo_builder.triton.client import connect, infer_model

        texts = ["", "one", "a text well over sixteen tokens long, so the checkpoint truncates it the same way " * 3, "日本語 🙂"]
        client = connect(f"127.0.0.1:{port.group(1)}")
        served = infer_model(client, "text_embedder", {"TEXT": np.array([[t.encode()] for t in texts], dtype=object)})["EMBEDDING"]
        client.close()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        stop_if_running(proc)  # the test failed: stop it the clean way first
    assert proc.returncode == 0
    expected = sentence_transformer(model).encode(texts)
    assert served.shape == expected.shape and np.abs(served - expected).max() <= 1e-4
