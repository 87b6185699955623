"""``repo-builder pull``: only what Triton loads, staged, validated, renamed into place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.publish_helpers import write_repository

from repo_builder.cli.main import main


def _publish(repo: Path, url: str, endpoint: str) -> None:
    assert main(["publish", str(repo), url, "--endpoint-url", endpoint, "--no-gpu", "-q"]) == 0


def _pull(url: str, out: Path, endpoint: str, *extra: str) -> int:
    return main(["pull", url, str(out), "--endpoint-url", endpoint, "--no-gpu", *extra])


def test_pull_downloads_only_loaded_versions_when_not_all(s3_server: str, bucket: str, tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "repo")
    write_repository(repo, amount=2, version=2)  # add/1 and add/2: Triton loads only 2
    _publish(repo, f"s3://{bucket}/m", s3_server)
    assert _pull(f"s3://{bucket}/m", tmp_path / "out", s3_server) == 0
    files = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert files == ["add/2/model.py", "add/config.pbtxt", "add/labels.txt", "pipeline/1/placeholder.txt", "pipeline/config.pbtxt"]
    assert _pull(f"s3://{bucket}/m", tmp_path / "all", s3_server, "--all") == 0
    assert (tmp_path / "all" / "add" / "1" / "model.py").is_file()


def test_pull_refuses_and_leaves_target_untouched_when_remote_is_invalid(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _publish(write_repository(tmp_path / "repo"), f"s3://{bucket}/m", s3_server)
    s3_client.delete_object(Bucket=bucket, Key="m/pipeline/1/placeholder.txt")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert _pull(f"s3://{bucket}/m", out, s3_server, "--replace") == 1
    assert "RB110" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if ".pull-" in p.name]  # the stage is gone


def test_pull_exits_2_when_target_is_not_empty_without_replace(
    s3_server: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _publish(write_repository(tmp_path / "repo"), f"s3://{bucket}/m", s3_server)
    assert _pull(f"s3://{bucket}/m", tmp_path / "repo", s3_server) == 2
    assert "--replace" in capsys.readouterr().err
    assert _pull(f"s3://{bucket}/m", tmp_path / "repo", s3_server, "--replace") == 0


def test_pull_refuses_object_whose_content_differs_from_published_hash(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = write_repository(tmp_path / "repo")
    _publish(repo, f"s3://{bucket}/m", s3_server)
    body = (repo / "add" / "1" / "model.py").read_bytes()
    meta = s3_client.head_object(Bucket=bucket, Key="m/add/1/model.py")["Metadata"]
    # Same metadata, other bytes: an object changed behind the publish's back.
    s3_client.put_object(Bucket=bucket, Key="m/add/1/model.py", Body=body.replace(b"+", b"-"), Metadata=meta)
    assert _pull(f"s3://{bucket}/m", tmp_path / "out", s3_server) == 1
    assert "does not match the sha256" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
