"""``publish --kserve NAME``: an InferenceService that KServe's own schema (its SDK's generated models) accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.kserve_schema import schema_errors
from support.publish_helpers import write_repository

from repo_builder.cli.main import main
from repo_builder.repository.kserve import inference_service, settings_for, to_yaml
from repo_builder.store.urls import parse_store_url


def _check(doc: dict[str, Any]) -> None:
    """KServe's own schema, as its SDK's generated models declare it: field names and types, recursively."""
    assert (doc["apiVersion"], doc["kind"]) == ("serving.kserve.io/v1beta1", "InferenceService")
    assert schema_errors(doc) == []


def test_inference_service_matches_kserve_crd_when_rendered_with_gpus() -> None:
    settings = settings_for("text-clf", parse_store_url("s3://models/prod/clf"), gpus=1, service_account="s3-reader")
    doc = inference_service(settings)
    _check(doc)
    model = doc["spec"]["predictor"]["model"]
    assert model["modelFormat"] == {"name": "triton"} and model["storageUri"] == "s3://models/prod/clf"
    assert model["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_inference_service_check_fails_when_a_field_is_unknown_or_mistyped() -> None:
    doc = inference_service(settings_for("clf", parse_store_url("s3://b/p")))
    doc["spec"]["predictor"]["model"]["storageURI"] = "s3://b/p"  # misspelt: KServe would drop it
    assert schema_errors(doc) == [".spec.predictor.model.storageURI: not a field of V1beta1ModelSpec"]
    doc["spec"]["predictor"]["minReplicas"] = "one"
    assert ".spec.predictor.minReplicas: expected int, got str" in schema_errors(doc)


def test_to_yaml_round_trips_through_a_yaml_parser_when_given_the_document() -> None:
    yaml = pytest.importorskip("yaml")
    doc = inference_service(settings_for("clf", parse_store_url("s3://b/p: odd # prefix")))
    assert yaml.safe_load(to_yaml(doc)) == doc


def test_publish_writes_inference_service_next_to_report_when_kserve_named(
    s3_server: str, bucket: str, tmp_path: Path
) -> None:
    yaml = pytest.importorskip("yaml")
    repo = write_repository(tmp_path / "repo")
    reports = tmp_path / "reports"
    reports.mkdir()
    code = main(["publish", str(repo), f"s3://{bucket}/clf", "--endpoint-url", s3_server, "--no-gpu", "-q",
                 "--report", str(reports / "publish.json"), "--kserve", "clf"])
    assert code == 0
    doc = yaml.safe_load((reports / "clf.inferenceservice.yaml").read_text())
    _check(doc)
    assert doc["spec"]["predictor"]["model"]["storageUri"] == f"s3://{bucket}/clf"


def test_publish_exits_2_before_uploading_when_kserve_name_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = write_repository(tmp_path / "repo")
    assert main(["publish", str(repo), "s3://b/p", "--kserve", "Bad_Name", "--no-gpu"]) == 2
    assert capsys.readouterr().err.startswith("error: --kserve 'Bad_Name'")
