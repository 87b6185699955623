"""``repo_builder.publish_repository`` and ``repo_builder.pull_repository`` against moto's S3 server, used only
through ``repo_builder.<name>`` (the test helpers come from the publish tests)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.publish_helpers import moto_s3_server, tree_digest, write_repository

import repo_builder


@pytest.fixture(scope="module")
def s3_server() -> Iterator[str]:
    with moto_s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def url(s3_server: str) -> str:
    import boto3  # heavy, and only with the remote extra

    bucket = f"b{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/models"


def test_publish_then_pull_round_trips_byte_for_byte_when_called_through_the_api(
    s3_server: str, url: str, tmp_path: Path
) -> None:
    repo = write_repository(tmp_path / "repo")
    no_gpu = repo_builder.ValidateOptions(gpu_present=False)
    lines: list[str] = []
    published = repo_builder.publish_repository(
        repo, repo_builder.parse_store_url(url, s3_server), repo_builder.PublishOptions(validate=no_gpu), lines.append
    )
    assert published.verdict is not None and published.verdict.ok, published.verdict
    assert published.to_json()["remote_problems"] == [] and any("passes" in line for line in lines), lines
    pulled = repo_builder.pull_repository(
        repo_builder.parse_store_url(url, s3_server), tmp_path / "pulled", repo_builder.PullOptions(validate=no_gpu)
    )
    assert pulled.report.ok and tree_digest(pulled.out_dir) == tree_digest(repo)


def test_publish_takes_a_url_string_with_the_endpoint_from_the_environment_when_given_one(
    s3_server: str, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    repo = write_repository(tmp_path / "repo")
    result = repo_builder.publish_repository(repo, url, repo_builder.PublishOptions(dry_run=True))
    assert result.verdict is None and sorted(f.relative for f in result.plan.uploads) == sorted(tree_digest(repo))


def test_publish_refuses_a_repository_the_validator_refuses_when_not_forced(url: str, tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "repo")
    (repo / "add" / "config.pbtxt").write_text('backend: "python"\nmax_batch_size: -1\n')
    with pytest.raises(repo_builder.RefusedError, match="--force"):
        repo_builder.publish_repository(repo, url)


def test_pull_raises_user_error_when_the_target_is_a_file(url: str, tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("")
    with pytest.raises(repo_builder.UserError, match="not a folder"):
        repo_builder.pull_repository(url, target)


def test_publish_and_pull_are_documented_when_exported() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    for name in ("publish_repository", "pull_repository", "parse_store_url", "PublishOptions", "PullOptions"):
        assert name in repo_builder.__all__ and f"repo_builder.{name}(" in docs, name
        assert (getattr(repo_builder, name).__doc__ or "").strip(), name
