"""Hostile object stores (issue 20): keys that name absolute paths, credentials in URLs, pull targets that
are system folders, a relative repository path for publish. Against moto's real S3 server on loopback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.publish_helpers import CREDENTIALS, write_repository
from support.silent_server import silent_server

from repo_builder.cli.main import main

SECRET = "s3cr3t-never-printed"


def _publish(repo: Path, url: str, endpoint: str) -> None:
    assert main(["publish", str(repo), url, "--endpoint-url", endpoint, "--no-gpu", "-q"]) == 0


def _absolute_key(s3_client: Any, bucket: str, victim: Path) -> None:
    """An object whose key is ``m/`` + an absolute path: ``m//tmp/.../victim.txt``."""
    s3_client.put_object(Bucket=bucket, Key=f"m/{victim}", Body=b"written from the store")


def test_validate_s3_writes_nothing_outside_and_reports_rb007_when_key_is_absolute(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _publish(write_repository(tmp_path / "repo"), f"s3://{bucket}/m", s3_server)
    victim = tmp_path / "outside" / "victim.txt"
    _absolute_key(s3_client, bucket, victim)
    code = main(["validate", f"s3://{bucket}/m", "--s3-endpoint", s3_server, "--no-gpu"])
    out = capsys.readouterr().out
    assert not victim.exists() and not victim.parent.exists()
    assert code == 1 and "RB007" in out


def test_pull_writes_nothing_outside_and_refuses_when_key_is_absolute(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _publish(write_repository(tmp_path / "repo"), f"s3://{bucket}/m", s3_server)
    victim = tmp_path / "outside" / "victim.txt"
    _absolute_key(s3_client, bucket, victim)
    for extra in ((), ("--all",)):
        code = main(["pull", f"s3://{bucket}/m", str(tmp_path / "out"), "--endpoint-url", s3_server, "--no-gpu", *extra])
        assert code == 1, capsys.readouterr().err
        assert "RB007" in capsys.readouterr().err
        assert not victim.exists() and not victim.parent.exists()
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("target", ["/", "~"])
def test_pull_refuses_with_exit_2_when_target_is_root_or_home(
    target: str, s3_server: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _publish(write_repository(tmp_path / "repo"), f"s3://{bucket}/m", s3_server)
    folder = str(Path(target).expanduser())
    before = sorted(p.name for p in Path(folder).iterdir())
    code = main(["pull", f"s3://{bucket}/m", folder, "--endpoint-url", s3_server, "--no-gpu", "--replace"])
    err = capsys.readouterr().err
    assert code == 2 and ("root" in err or "home" in err), err
    assert sorted(p.name for p in Path(folder).iterdir()) == before


@pytest.mark.parametrize("command", ["validate", "publish", "pull", "validate-endpoint", "pull-endpoint"])
def test_store_error_redacts_credentials_when_url_carries_them(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = write_repository(tmp_path / "repo")
    url = "s3://user:S3CR3T-VALUE@bucket/prefix"
    endpoint = "http://user:S3CR3T-VALUE@127.0.0.1:9/"
    argv = {
        "validate": ["validate", url],
        "publish": ["publish", str(repo), url, "--dry-run", "--no-gpu"],
        "pull": ["pull", url, str(tmp_path / "out")],
        "validate-endpoint": ["validate", "s3://bucket/prefix", "--s3-endpoint", endpoint],
        "pull-endpoint": ["pull", "s3://bucket/prefix", str(tmp_path / "out"), "--endpoint-url", endpoint],
    }[command]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2
    assert "S3CR3T-VALUE" not in captured.out + captured.err
    assert "***" in captured.err


def test_publish_dry_run_succeeds_when_repository_path_is_relative(
    s3_server: str, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_repository(tmp_path / "repo")
    monkeypatch.chdir(tmp_path)
    assert main(["publish", "repo", f"s3://{bucket}/m", "--endpoint-url", s3_server, "--no-gpu", "--dry-run"]) == 0
    assert main(["publish", "repo", f"s3://{bucket}/m", "--endpoint-url", s3_server, "--no-gpu", "-q"]) == 0


@pytest.fixture
def silent_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a server that accepts every connection and never answers."""
    pytest.importorskip("s3fs", reason="the remote extra is not installed")
    for key, value in {**CREDENTIALS, "AWS_SECRET_ACCESS_KEY": SECRET}.items():
        monkeypatch.setenv(key, value)
    with silent_server() as (endpoint, _):
        yield endpoint


@pytest.mark.parametrize("command", ["validate", "pull", "publish"])
def test_store_command_exits_3_within_timeout_when_endpoint_never_answers(
    command: str, silent_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "s3://bucket/prefix"
    argv = {
        "validate": ["validate", url, "--s3-endpoint", silent_endpoint],
        "pull": ["pull", url, str(tmp_path / "out"), "--endpoint-url", silent_endpoint],
        "publish": ["publish", str(write_repository(tmp_path / "repo")), url, "--endpoint-url", silent_endpoint, "--no-gpu"],
    }[command]
    started = time.monotonic()
    code = main([*argv, "--timeout", "3"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 3, err
    assert elapsed < 3 + 4, elapsed  # the deadline, plus publish's local validation and the exit
    assert silent_endpoint in err and "--timeout" in err
    assert SECRET not in err


def test_publish_refuses_report_through_symlink_before_uploading(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    link = tmp_path / "report.json"
    link.symlink_to(victim)
    repo = write_repository(tmp_path / "repo")
    code = main(["publish", str(repo), f"s3://{bucket}/m", "--endpoint-url", s3_server, "--no-gpu", "--report", str(link)])
    assert code == 2 and "symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "precious" and link.is_symlink()
    assert "Contents" not in s3_client.list_objects_v2(Bucket=bucket)  # nothing uploaded


def test_with_retries_stops_at_deadline_when_backoff_would_pass_it() -> None:
    from repo_builder.errors import ToolError
    from repo_builder.store.deadline import Deadline
    from repo_builder.store.retries import with_retries

    calls: list[float] = []

    def refused() -> None:
        calls.append(time.monotonic())
        raise ConnectionError("connection refused")

    deadline = Deadline(time.monotonic() + 1.0, 1.0, "http://127.0.0.1:9")
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"--timeout"):
        with_retries(refused, "s3://b/p", attempts=10, base_delay=0.4, deadline=deadline)
    assert time.monotonic() - started < 1.5
    assert 1 < len(calls) < 10  # retried, but not past the deadline
