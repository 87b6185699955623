"""``serve URL`` and ``validate --live URL``: Triton reads an s3:// repository from moto's S3 server."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from support.onnx_repo_factory import write_onnx_model
from support.publish_helpers import moto_s3_server
from support.triton_repo_factory import write_double_repository

from repo_builder.live.judge import LiveSettings, Status, validate_live
from repo_builder.triton import start_server
from repo_builder.triton.arguments import ServerOptions
from repo_builder.triton.serving import ServeSettings, serve
from repo_builder.validate.engine import check_repository

pytestmark = pytest.mark.triton


@pytest.fixture(scope="module")
def bucket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(endpoint, s3 URL) of a repository uploaded to moto: double, pipeline, and an ONNX model."""
    import boto3  # heavy, and only with the remote extra

    with moto_s3_server() as endpoint:
        root = write_double_repository(tmp_path_factory.mktemp("s3") / "repo")
        write_onnx_model(root, "scale")
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket="models-bucket")
        for path in sorted(root.rglob("*")):
            if path.is_file():
                key = f"prod/{path.relative_to(root).as_posix()}"
                client.put_object(Bucket="models-bucket", Key=key, Body=path.read_bytes())
        yield endpoint, "s3://models-bucket/prod"


def test_start_server_answers_from_bucket_when_given_s3_url_in_poll_mode(
    bucket: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint, url = bucket
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)  # turned into Triton's s3://host:port/... form
    with start_server(url, mode="poll", poll_seconds=1) as server:
        assert server.repository == f"s3://127.0.0.1:{endpoint.rsplit(':', 1)[1]}/models-bucket/prod"
        out = server.infer("pipeline", {"X": np.ones((1, 4), np.float32)})
    assert np.array_equal(out["Y"], np.full((1, 4), 2.0, np.float32))


def test_serve_lists_bucket_models_when_given_triton_s3_form(bucket: tuple[str, str]) -> None:
    endpoint, url = bucket
    triton_url = f"s3://{endpoint.removeprefix('http://')}/{url.removeprefix('s3://')}"
    settings = ServeSettings(ServerOptions(mode="explicit"), load_timeout=60, allow_unavailable=True)  # scale: listed
    with serve(triton_url, settings) as serving:
        states = {row.name: row.state for row in serving.rows}
    assert states["double"] == "READY" and states["pipeline"] == "READY"
    assert states["scale"] == "UNAVAILABLE"  # the embedded Triton has no ONNX Runtime backend


def test_validate_live_reads_bucket_and_reports_onnx_unproven_when_repository_is_remote(
    bucket: tuple[str, str],
) -> None:
    from repo_builder.validate.remote import mirror_repository

    endpoint, url = bucket
    with mirror_repository(url, endpoint) as repository:
        offline = check_repository(repository, rules=())
    report = validate_live(offline, LiveSettings(load_timeout=30, s3_endpoint=endpoint))
    live = {m.name: m.live for m in report.models}
    assert live["double"].loaded and live["pipeline"].inferred is True  # type: ignore[union-attr]
    assert live["scale"].status == Status.NOT_PROVEN  # type: ignore[union-attr]
    assert "local copy" in (live["scale"].reason or "")  # type: ignore[union-attr]


def test_validate_live_location_judges_bucket_offline_then_live_when_given_s3_url(bucket: tuple[str, str]) -> None:
    # The CLI's route: validate_location's after-hook runs the server while the store's mirror still exists.
    from repo_builder.live.location import validate_live_location
    from repo_builder.validate.records import ValidateOptions

    endpoint, url = bucket
    settings = LiveSettings(load_timeout=30, s3_endpoint=endpoint, allow_unproven=True)
    report = validate_live_location(url, ValidateOptions(gpu_present=False), settings, s3_endpoint=endpoint)
    live = {m.name: m.live for m in report.models}
    assert live["double"].loaded and live["pipeline"].inferred is True  # type: ignore[union-attr]
    assert live["scale"].status == Status.NOT_PROVEN  # type: ignore[union-attr]
    assert "live on this machine" in report.target and report.repository.location == url
