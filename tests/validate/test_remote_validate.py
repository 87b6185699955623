"""``validate s3://bucket/prefix`` against moto's real S3 server on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.publish_helpers import moto_s3_server
from support.validate_repo_helpers import make_add_sub, make_model, onnx_bytes, onnx_config

from repo_builder.cli.main import main
from repo_builder.validate.engine import check_repository
from repo_builder.validate.remote import mirror_repository

ENSEMBLE = '''name: "pipeline"
platform: "ensemble"
input [{ name: "A" data_type: TYPE_FP32 dims: [4] }, { name: "B" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "S" data_type: TYPE_FP32 dims: [4] }]
ensemble_scheduling { step [{ model_name: "add_sub" model_version: -1
  input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" }
  output_map { key: "OUTPUT0" value: "S" } }] }
'''


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    with moto_s3_server() as endpoint:
        yield endpoint


def _upload(endpoint: str, bucket: str, local: Path, prefix: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    client.create_bucket(Bucket=bucket)  # each test uses its own bucket
    for path in sorted(local.rglob("*")):
        if path.is_file():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(local).as_posix()}", Body=path.read_bytes())


def _repository(root: Path, with_placeholder: bool) -> Path:
    make_add_sub(root)
    graph = onnx_bytes([("x", "FLOAT", ["N", 4])], [("y", "FLOAT", ["N", 4])])
    make_model(root, "scale", onnx_config("scale", 8, [("x", "TYPE_FP32", [4])], [("y", "TYPE_FP32", [4])]),
               {1: {"model.onnx": graph}})
    make_model(root, "pipeline", ENSEMBLE, {1: {".keep": ""}} if with_placeholder else {1: {}})
    return root


def test_validate_s3_passes_when_ensemble_has_placeholder(s3_endpoint: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    _upload(s3_endpoint, "good", _repository(tmp_path / "r", with_placeholder=True), "models")
    code = main(["validate", "s3://good/models", "--s3-endpoint", s3_endpoint, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert doc["repository"] == "s3://good/models"
    assert {m["name"] for m in doc["models"]} == {"add_sub", "scale", "pipeline"}


def test_validate_s3_flags_ensemble_whose_empty_version_folder_was_dropped(
    s3_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Locally 1/ exists (empty) and validates; the object store keeps no empty folders.
    _upload(s3_endpoint, "dropped", _repository(tmp_path / "r", with_placeholder=False), "m")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)  # honoured without --s3-endpoint
    code = main(["validate", "s3://dropped/m", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    diag = next(d for d in doc["diagnostics"] if d["code"] == "RB110")
    assert diag["model"] == "pipeline" and diag["path"] == "pipeline"
    assert "placeholder" in diag["hint"]


def test_validate_s3_says_when_onnx_was_not_downloaded(s3_endpoint: str, tmp_path: Path) -> None:
    _upload(s3_endpoint, "big", _repository(tmp_path / "r", with_placeholder=True), "models")
    with mirror_repository("s3://big/models", s3_endpoint, max_onnx_bytes=0) as repository:
        report = check_repository(repository)
        local_copy = repository.root
        scale = repository.model("scale")
        assert scale is not None and scale.version(1).entry("model.onnx").size > 0
    assert report.ok
    notes = [d for d in report.diagnostics if d.code == "RB601"]
    assert notes and "needs the model file" in notes[0].message and notes[0].severity.value == "info"
    assert not local_copy.exists()  # the temporary mirror is gone


def test_validate_s3_exits_2_with_one_line_when_bucket_missing(s3_endpoint: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "s3://no-such-bucket/models", "--s3-endpoint", s3_endpoint])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: s3://no-such-bucket/models") and err.count("\n") == 1


def test_validate_s3_reads_triton_host_port_url_when_no_endpoint_is_given(
    s3_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Triton's own form for an S3-compatible store: the endpoint is in the URL, no option needed.
    _upload(s3_endpoint, "tritonform", _repository(tmp_path / "r", with_placeholder=True), "a/b")
    url = f"s3://{s3_endpoint.removeprefix('http://')}/tritonform/a/b"
    code = main(["validate", url, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    assert {m["name"] for m in doc["models"]} == {"add_sub", "scale", "pipeline"}
