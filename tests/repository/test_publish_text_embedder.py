"""A built text-embedder repository published to S3 (moto's real server) validates there as it did locally."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_builder.cli.main import main
from repo_builder.export.tiny_embedder import make_tiny_sentence_transformer
from repo_builder.validate.remote import check_remote

pytest.importorskip("sentence_transformers")


def test_publish_keeps_embedder_valid_when_published_to_s3(s3_server: str, bucket: str, tmp_path: Path) -> None:
    model = make_tiny_sentence_transformer(tmp_path / "st")
    repo = tmp_path / "repo"
    assert main(["build", "text-embedder", "--model", str(model), "--out", str(repo), "--runtime", "python", "-q"]) == 0
    assert main(["publish", str(repo), f"s3://{bucket}/emb", "--endpoint-url", s3_server, "--no-gpu"]) == 0
    verdict = check_remote(f"s3://{bucket}/emb", s3_server)
    assert verdict.ok, verdict.problems()
    assert main(["pull", f"s3://{bucket}/emb", str(tmp_path / "pulled"), "--endpoint-url", s3_server, "--all", "--no-gpu"]) == 0
    assert (tmp_path / "pulled" / "text_embedder" / "1" / "README.md").read_bytes() == (repo / "text_embedder" / "1" / "README.md").read_bytes()
