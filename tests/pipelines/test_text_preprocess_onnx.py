"""build text-classifier / text-embedder --preprocess onnx: the tokenizer as an ONNX Runtime step loading
onnxruntime-extensions' library (model_operations), proven live through the stand-in and against the family's
reference; bad option combinations and tokenizers the op cannot reproduce refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.main import main
from repo_builder.export.tiny_embedder import make_tiny_sentence_transformer
from repo_builder.export.tiny_models import make_tiny_text_classifier
from repo_builder.pipelines.reference import check_reference
from repo_builder.render.parse_back import parse_config
from repo_builder.triton_images import image_row, newest_release

pytest.importorskip("onnxruntime_extensions", reason="onnxruntime-extensions (the export extra) is not installed")


def _error(argv: list[str], capsys: Any) -> str:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.triton
def test_text_classifier_served_without_python_preprocess_when_preprocess_onnx(tmp_path: Path, capsys: Any) -> None:
    model = make_tiny_text_classifier(tmp_path / "bert")
    repo = tmp_path / "repo"
    capsys.readouterr()
    # The stock image has no onnxruntime-extensions: an image built from the Dockerfile installs it (issue 35).
    code = main(["build", "text-classifier", "--model", str(model), "--out", str(repo), "--step-packages", "dockerfile",
                 "--preprocess", "onnx", "--live", "--format", "json", "-q"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["validation"]["ok"] is True, summary
    pre = repo / "text_classifier_preprocess"
    config = parse_config((pre / "config.pbtxt").read_text(), "preprocess")
    assert config.platform == "onnxruntime_onnx" and not (pre / "1" / "model.py").exists()
    python = image_row(newest_release()).python
    # The path where the Dockerfile's pip install puts the library in the image, never this machine's.
    assert [p.startswith(f"/usr/local/lib/python{python}/dist-packages/onnxruntime_extensions/_extensions_pydll.")
            for p in config.model_operations.op_library_filename] == [True]
    assert "onnxruntime-extensions==" in (repo / "Dockerfile").read_text(encoding="utf-8")
    # text-classifier declares no reference check; --live above served the ensemble through the stand-in.


@pytest.mark.triton
def test_text_embedder_matches_sentence_transformers_when_preprocess_onnx(tmp_path: Path, capsys: Any) -> None:
    model = make_tiny_sentence_transformer(tmp_path / "st", max_seq_length=48)
    repo = tmp_path / "repo"
    capsys.readouterr()
    code = main(["build", "text-embedder", "--model", str(model), "--out", str(repo), "--step-packages", "dockerfile",
                 "--preprocess", "onnx", "--live", "--format", "json", "-q"])
    assert code == 0, capsys.readouterr()
    report = check_reference(repo, minimum_cases=200)
    assert report.passed and report.cases >= 200, report.failures


def test_op_library_refused_when_relative_or_without_onnx(tmp_path: Path, capsys: Any) -> None:
    model = make_tiny_text_classifier(tmp_path / "bert")
    base = ["build", "text-classifier", "--model", str(model), "--out", str(tmp_path / "repo"), "--runtime", "python", "-q"]
    assert "--op-library" in _error([*base, "--op-library", "/opt/lib.so"], capsys)
    assert "absolute path" in _error([*base, "--preprocess", "onnx", "--op-library", "lib/x.so"], capsys)
    assert not (tmp_path / "repo").exists()


def test_build_refuses_tokenizer_op_cannot_reproduce_when_preprocess_onnx(tmp_path: Path, capsys: Any) -> None:
    model = make_tiny_text_classifier(tmp_path / "bert")
    data = json.loads((model / "tokenizer.json").read_text())
    data["pre_tokenizer"] = {"type": "Whitespace"}
    (model / "tokenizer.json").write_text(json.dumps(data))
    err = _error(["build", "text-classifier", "--model", str(model), "--out", str(tmp_path / "repo"), "--runtime", "python",
                  "--preprocess", "onnx", "--step-packages", "dockerfile", "--no-parity", "-q"], capsys)
    assert "tokenizer.json" in err and "Whitespace" in err and "--preprocess python" in err
    assert not (tmp_path / "repo").exists()


@pytest.mark.triton
def test_onnx_tokenizer_step_refuses_long_texts_alone_and_fast_when_sent_with_good_requests(tmp_path: Path) -> None:
    """The graph's own limits (characters per text, --max-request-bytes as characters per request) on the server:
    each refusal fails its own request in well under a second, with the limit named, and the good requests sent
    at the same time are answered exactly as alone (the step has no dynamic batcher to put them in one run)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    from tritonclient.utils import InferenceServerException

    from repo_builder.pipelines.reference import built_ensemble, served_copy
    from repo_builder.triton import start_server

    model = make_tiny_text_classifier(tmp_path / "bert")
    repo = tmp_path / "repo"
    assert main(["build", "text-classifier", "--model", str(model), "--out", str(repo), "--step-packages", "dockerfile",
                 "--preprocess", "onnx", "--max-request-bytes", "200000", "--no-parity", "-q"]) == 0
    config = parse_config((repo / "text_classifier_preprocess" / "config.pbtxt").read_text(), "preprocess")
    assert not config.HasField("dynamic_batching") and config.max_batch_size > 1
    per_text = 128 * 1024  # max_length (the tiny model's 128) x CHARS_PER_TOKEN
    good = [["George Washington went to Washington"], ["a short one", "é" * per_text]]  # the second: at the limit
    bad = {
        "10 MB": (["fine", "w" * 10_000_000], f"a text of this request is over this step's limit of {per_text} characters"),
        "request": (["y" * 110_000, "z" * 100_000], "this request's texts hold over 200000 characters"),
    }

    def send(server: Any, texts: list[str]) -> dict[str, Any] | Exception:
        start = time.perf_counter()
        try:
            answer: dict[str, Any] | Exception = server.infer(
                "text_classifier", {"TEXT": np.array([[t.encode()] for t in texts], dtype=np.object_)}, timeout=120.0)
        except InferenceServerException as exc:
            answer = exc
        timings[id(texts)] = time.perf_counter() - start
        return answer

    timings: dict[int, float] = {}
    built = built_ensemble(repo)
    with served_copy(repo, built, None) as folder, start_server(folder, mode="explicit") as server:
        server.load("text_classifier")
        alone = [send(server, texts) for texts in good]
        requests = [good[0], bad["10 MB"][0], good[1], bad["request"][0]]
        with ThreadPoolExecutor(len(requests)) as pool:
            together = list(pool.map(lambda texts: send(server, texts), requests))
        again = send(server, good[0])
    for (name, (texts, expected)), answer in zip(bad.items(), [together[1], together[3]], strict=True):
        assert isinstance(answer, Exception) and expected in str(answer) and "refused before tokenizing" in str(answer), (name, answer)
        assert timings[id(texts)] < 3.0, (name, timings[id(texts)])  # tokenizing 10 MB takes 4-9 s
    for expected, answer in zip(alone + alone[:1], [together[0], together[2], again], strict=True):
        assert isinstance(expected, dict) and isinstance(answer, dict), answer
        assert expected.keys() == answer.keys() and all(np.array_equal(expected[k], answer[k]) for k in expected)
