"""publish -> remote validate -> pull against moto's real S3 server on loopback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.publish_helpers import FlakyProxy, free_port, tree_digest, write_repository

from repo_builder.cli.main import main
from repo_builder.repository.publish import local_files
from repo_builder.store.publish_record import PUBLISH_STATE_FILE
from repo_builder.store.urls import parse_store_url
from repo_builder.validate.remote import check_remote
from repo_builder.validate.scan import scan_repository


def _keys(client: Any, bucket: str) -> dict[str, bytes]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            out[item["Key"]] = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
    return out


def _publish(repo: Path, url: str, endpoint: str, *extra: str) -> int:
    return main(["publish", str(repo), url, "--endpoint-url", endpoint, "--no-gpu", *extra])


def test_publish_round_trips_byte_for_byte_when_pulled_back(
    s3_server: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = write_repository(tmp_path / "repo")
    assert _publish(repo, f"s3://{bucket}/models", s3_server) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "[1/5] uploaded add/labels.txt (8 B; 8 B of " in captured.err  # plain progress lines: not a TTY
    port = s3_server.rsplit(":", 1)[1]
    assert f"--model-repository=s3://127.0.0.1:{port}/{bucket}/models" in out
    assert "AWS_ACCESS_KEY_ID" in out and "testing" not in out  # names the variables, never their values
    verdict = check_remote(f"s3://{bucket}/models", s3_server)
    assert verdict.ok, verdict.problems()
    assert main(["pull", f"s3://{bucket}/models", str(tmp_path / "pulled"), "--endpoint-url", s3_server, "--all", "--no-gpu"]) == 0
    assert tree_digest(tmp_path / "pulled") == tree_digest(repo)


def test_publish_uploads_files_before_config_and_members_before_ensemble_when_planning(tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "repo")
    (repo / "pipeline" / "1" / "placeholder.txt").unlink()  # empty: publish must add a placeholder
    order = [f.relative for f in local_files(repo, scan_repository(repo))]
    assert order == [
        "add/labels.txt",
        "add/1/model.py",
        "add/config.pbtxt",
        "pipeline/1/placeholder.txt",
        "pipeline/config.pbtxt",
    ]


def test_publish_puts_placeholder_in_store_when_version_folder_is_empty(s3_server: str, bucket: str, tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "repo")
    (repo / "pipeline" / "1" / "placeholder.txt").unlink()
    assert _publish(repo, f"s3://{bucket}/m", s3_server) == 0
    verdict = check_remote(f"s3://{bucket}/m", s3_server)
    assert verdict.ok, verdict.problems()
    assert verdict.report.repository.model("pipeline").version(1).has("placeholder.txt")


def test_publish_skips_unchanged_files_when_published_again(
    s3_server: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = write_repository(tmp_path / "repo")
    url = f"s3://{bucket}/m"
    report = tmp_path / "report.json"
    assert _publish(repo, url, s3_server) == 0
    assert _publish(repo, url, s3_server, "--report", str(report)) == 0
    assert json.loads(report.read_text())["uploaded"] == []
    (repo / "add" / "1" / "model.py").write_text("# changed\n" + (repo / "add" / "1" / "model.py").read_text())
    assert _publish(repo, url, s3_server, "--report", str(report)) == 0
    assert json.loads(report.read_text())["uploaded"] == ["add/1/model.py"]
    capsys.readouterr()


def test_publish_dry_run_changes_nothing_when_asked(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = write_repository(tmp_path / "repo")
    assert _publish(repo, f"s3://{bucket}/m", s3_server, "--dry-run") == 0
    assert "upload add/1/model.py" in capsys.readouterr().err
    assert _publish(repo, f"s3://{bucket}/m", s3_server, "--dry-run", "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["uploaded"][-1] == "pipeline/config.pbtxt" and doc["remote_ok"] is None
    assert _keys(s3_client, bucket) == {}


def test_publish_refuses_with_exit_1_and_uploads_nothing_when_repository_invalid(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = write_repository(tmp_path / "repo")
    shutil.rmtree(repo / "add" / "1")  # no version left
    assert _publish(repo, f"s3://{bucket}/m", s3_server) == 1
    err = capsys.readouterr().err
    assert "--force" in err.splitlines()[-1] and err.splitlines()[-1].startswith("error: ")
    assert _keys(s3_client, bucket) == {}
    assert _publish(repo, f"s3://{bucket}/m", s3_server, "--force") == 0
    assert "add/config.pbtxt" in {k.removeprefix("m/") for k in _keys(s3_client, bucket)}


def test_publish_keeps_remote_only_version_when_prune_is_not_given(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"s3://{bucket}/m"
    newer = write_repository(tmp_path / "newer", amount=2, version=2)
    assert _publish(newer, url, s3_server) == 0
    repo = write_repository(tmp_path / "repo")  # only version 1
    capsys.readouterr()
    assert _publish(repo, url, s3_server) == 0
    assert f"warning: {url}/add/2 is newer than the published versions" in capsys.readouterr().err
    assert "m/add/2/model.py" in _keys(s3_client, bucket)
    assert _publish(repo, url, s3_server, "--prune") == 0
    keys = set(_keys(s3_client, bucket))
    assert "m/add/2/model.py" not in keys and "m/add/1/model.py" in keys


def test_publish_accepts_triton_url_with_endpoint_when_given_host_and_port(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path
) -> None:
    repo = write_repository(tmp_path / "repo")
    hostport = s3_server.removeprefix("http://")
    assert main(["publish", str(repo), f"s3://{hostport}/{bucket}/deep/prefix", "--no-gpu", "-q"]) == 0
    assert f"deep/prefix/{PUBLISH_STATE_FILE}" in _keys(s3_client, bucket)
    location = parse_store_url(f"s3://{hostport}/{bucket}/deep/prefix")
    assert (location.bucket, location.prefix, location.endpoint_url) == (bucket, "deep/prefix", s3_server)
    assert location.triton_url() == f"s3://{hostport}/{bucket}/deep/prefix"


@pytest.mark.parametrize("url", ["http://example.com/x", "s3://", "s3://Bad_Bucket/x", "s3://b/a/../c"])
def test_publish_exits_2_with_one_line_when_url_is_bad(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = write_repository(tmp_path / "repo")
    assert main(["publish", str(repo), url, "--no-gpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {url}") and err.count("\n") == 1


def test_publish_exits_2_when_bucket_is_missing(s3_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = write_repository(tmp_path / "repo")
    assert _publish(repo, "s3://no-such-bucket/m", s3_server, "-q") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: s3://no-such-bucket/m") and err.count("\n") == 1


def test_publish_exits_3_when_store_is_unreachable(tmp_path: Path, capsys: pytest.CaptureFixture[str], s3_server: str) -> None:
    repo = write_repository(tmp_path / "repo")
    dead = f"http://127.0.0.1:{free_port()}"
    assert main(["publish", str(repo), "s3://b/m", "--endpoint-url", dead, "--no-gpu", "--retries", "0", "-q"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: s3://b/m") and err.count("\n") == 1


def test_publish_succeeds_when_the_first_connections_are_reset(
    s3_server: str, bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = write_repository(tmp_path / "repo")
    port = int(s3_server.rsplit(":", 1)[1])
    proxy = FlakyProxy(port, drop=4)
    try:  # without our retries the resets fail the publish (exit 3): the retries below are what help
        assert _publish(repo, f"s3://{bucket}/m", f"http://127.0.0.1:{proxy.port}", "--retries", "0", "-q") == 3
    finally:
        proxy.close()
    proxy = FlakyProxy(port, drop=4)
    try:
        endpoint = f"http://127.0.0.1:{proxy.port}"
        assert _publish(repo, f"s3://{bucket}/m", endpoint, "--retries", "3") == 0, capsys.readouterr().err
        assert proxy.dropped == 4
    finally:
        proxy.close()
    assert check_remote(f"s3://{bucket}/m", s3_server).ok
