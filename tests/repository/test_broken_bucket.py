"""A published bucket broken by hand: the remote validation says what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.publish_helpers import STEP_CONFIG, write_repository

from repo_builder.cli.main import main
from repo_builder.validate.remote import check_remote


@pytest.fixture
def published(s3_server: str, bucket: str, tmp_path: Path) -> str:
    repo = write_repository(tmp_path / "repo")
    url = f"s3://{bucket}/m"
    assert main(["publish", str(repo), url, "--endpoint-url", s3_server, "--no-gpu", "-q"]) == 0
    return url


def test_remote_validate_refuses_ensemble_when_its_placeholder_is_deleted(
    published: str, s3_server: str, s3_client: Any, bucket: str
) -> None:
    s3_client.delete_object(Bucket=bucket, Key="m/pipeline/1/placeholder.txt")
    verdict = check_remote(published, s3_server)
    assert not verdict.ok
    codes = {(d.code, d.model) for d in verdict.report.diagnostics if d.severity.value == "error"}
    assert ("RB110", "pipeline") in codes
    assert any("pipeline/1/placeholder.txt: missing" in p for p in verdict.problems())


def test_remote_validate_refuses_model_when_config_is_uploaded_without_its_files(
    published: str, s3_server: str, s3_client: Any, bucket: str
) -> None:
    s3_client.put_object(Bucket=bucket, Key="m/extra/config.pbtxt", Body=STEP_CONFIG.replace('"add"', '"extra"').encode())
    verdict = check_remote(published, s3_server)
    errors = [d for d in verdict.report.diagnostics if d.model == "extra" and d.severity.value == "error"]
    assert errors and not verdict.ok


def test_remote_validate_reports_truncated_object_when_size_differs_from_publish(
    published: str, s3_server: str, s3_client: Any, bucket: str
) -> None:
    body = s3_client.get_object(Bucket=bucket, Key="m/add/1/model.py")["Body"].read()
    s3_client.put_object(Bucket=bucket, Key="m/add/1/model.py", Body=body[: len(body) // 2])
    verdict = check_remote(published, s3_server)
    assert not verdict.ok
    assert verdict.problems() == [
        f"{published}/add/1/model.py: {len(body) // 2} bytes, but the last publish uploaded {len(body)}; publish again"
    ]


def test_remote_validate_reports_interrupted_publish_when_record_says_publishing(
    published: str, s3_server: str, s3_client: Any, bucket: str
) -> None:
    s3_client.put_object(Bucket=bucket, Key="m/repo-builder-publish.json", Body=b'{"state": "publishing", "started": "T"}')
    verdict = check_remote(published, s3_server)
    assert verdict.report.ok and not verdict.ok
    assert verdict.interrupted is not None and "did not finish" in verdict.interrupted


def test_validate_cli_passes_when_bucket_holds_a_complete_publish(
    published: str, s3_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["validate", published, "--s3-endpoint", s3_server, "--no-gpu", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert not [d for d in doc["diagnostics"] if d["code"] in ("RB003", "RB004")]


def test_validate_cli_fails_with_rb004_when_published_object_is_truncated(
    published: str, s3_server: str, s3_client: Any, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    body = s3_client.get_object(Bucket=bucket, Key="m/add/1/model.py")["Body"].read()
    s3_client.put_object(Bucket=bucket, Key="m/add/1/model.py", Body=body[:10])
    code = main(["validate", published, "--s3-endpoint", s3_server, "--no-gpu", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["ok"] is False
    store = [d for d in doc["diagnostics"] if d["code"] == "RB004"]
    assert len(store) == 1, doc["diagnostics"]
    assert store[0]["path"] == "add/1/model.py" and store[0]["severity"] == "error" and store[0]["model"] is None
    assert store[0]["message"] == f"10 bytes, but the last publish uploaded {len(body)}"
    assert store[0]["hint"] == "publish again"


def test_validate_cli_fails_with_rb003_in_text_when_publish_was_interrupted(
    published: str, s3_server: str, s3_client: Any, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s3_client.put_object(Bucket=bucket, Key="m/repo-builder-publish.json", Body=b'{"state": "publishing", "started": "T"}')
    code = main(["validate", published, "--s3-endpoint", s3_server, "--no-gpu"])
    out = capsys.readouterr().out
    assert code == 1
    assert "RB003 publish-interrupted" in out and "did not finish" in out and "run the publish again" in out
    assert out.rstrip().splitlines()[-1].startswith("FAILED:")


def test_validate_sarif_describes_store_code_when_object_is_missing(
    published: str, s3_server: str, s3_client: Any, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    s3_client.delete_object(Bucket=bucket, Key="m/add/labels.txt")
    code = main(["validate", published, "--s3-endpoint", s3_server, "--no-gpu", "--format", "sarif"])
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert code == 1
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["RB004"]["name"] == "published-file-changed" and "Publish again" in rules["RB004"]["help"]["text"]
    result = next(r for r in run["results"] if r["ruleId"] == "RB004")
    assert result["message"]["text"].startswith("missing, but the last publish uploaded it")
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == f"{published}/add/labels.txt"
