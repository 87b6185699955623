"""The embedded Triton reads a published repository straight from moto's S3 server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.publish_helpers import write_repository

from repo_builder.cli.main import main
from repo_builder.store.urls import parse_store_url
from repo_builder.triton.server import start_server

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def test_triton_serves_published_repository_and_refuses_ensemble_when_placeholder_deleted(
    s3_server: str, s3_client: Any, bucket: str, tmp_path: Path
) -> None:
    repo = write_repository(tmp_path / "repo")
    url = f"s3://{bucket}/models"
    assert main(["publish", str(repo), url, "--endpoint-url", s3_server, "--no-gpu", "-q"]) == 0
    triton_url = parse_store_url(url, s3_server).triton_url()
    assert triton_url.startswith("s3://127.0.0.1:")
    with start_server(triton_url, mode="explicit", startup_timeout=120) as server:
        server.load("add")
        server.load("pipeline")
        x = np.arange(4, dtype=np.float32).reshape(1, 4)
        assert server.infer("pipeline", {"X": x})["Y"].tolist() == (x + 1).tolist()
        server.unload("pipeline")
        s3_client.delete_object(Bucket=bucket, Key="models/pipeline/1/placeholder.txt")
        outcome = server.try_load("pipeline")
        assert not outcome.loaded
        assert "at least one version must be available" in (outcome.reason or "")


def test_rollout_quick_fails_no_request_when_publishing_to_polling_servers() -> None:
    import importlib.util
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "rollout.py"
    spec = importlib.util.spec_from_file_location("rollout", script)
    assert spec is not None and spec.loader is not None
    rollout = importlib.util.module_from_spec(spec)
    sys.modules["rollout"] = rollout
    spec.loader.exec_module(rollout)
    result = rollout.run(quick=True)
    assert result["failed_requests"] == 0, result["errors"]
    assert result["requests"] > 50
    assert result["model_step"]["switch_seconds"] is not None
    assert result["ensemble"]["switch_seconds"] is not None
