"""The NER repository after build: bench measures it, publish puts it in S3 (moto), and the embedded Triton serves
it from there with the same entities as transformers' pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repo_builder.cli.main import main
from repo_builder.pipelines.token_reference import (
    compare_entities,
    entities_request,
    load_pipeline,
    reference_texts,
)
from repo_builder.store.urls import parse_store_url
from repo_builder.triton.server import start_server

pytestmark = [pytest.mark.triton, pytest.mark.slow]


@pytest.fixture(scope="module")
def ner_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.tiny_token_classifier import make_tiny_token_classifier

    return make_tiny_token_classifier(tmp_path_factory.mktemp("tiny-ner") / "ner")


@pytest.fixture(scope="module")
def ner_repo(ner_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("ner-repo")
    assert main(["build", "token-classifier", "--model", str(ner_model), "--runtime", "python", "--out", str(repo),
                 "--aggregation", "max", "-q", "--no-parity"]) == 0
    return repo


def test_bench_measures_ner_ensemble_without_errors_when_run_on_the_repository(ner_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert main(["bench", str(ner_repo), "--concurrency", "1,4", "--seconds", "1", "--warmup", "0.2", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    text = json.dumps(figures)
    assert '"errors": 0' in text and '"errors": 1' not in text
    assert "ner_postprocess" in text  # the slowest-step breakdown names the steps


def test_triton_serves_published_ner_repository_with_pipeline_entities_when_read_from_s3(
    ner_repo: Path, ner_model: Path, s3_server: str, bucket: str
) -> None:
    url = f"s3://{bucket}/ner"
    assert main(["publish", str(ner_repo), url, "--endpoint-url", s3_server, "--no-gpu", "-q"]) == 0
    texts = reference_texts(24)
    expected = load_pipeline(ner_model, "max", ["O"])(texts)
    with start_server(parse_store_url(url, s3_server).triton_url(), mode="explicit", startup_timeout=120) as server:
        server.load("ner", timeout=300)
        for start in range(0, len(texts), 8):
            rows = server.infer("ner", entities_request(texts[start:start + 8]))["entities"].reshape(-1)
            for offset, row in enumerate(rows):
                assert compare_entities(expected[start + offset], json.loads(row))[1] is None
