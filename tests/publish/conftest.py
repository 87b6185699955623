"""moto's standalone S3 server on loopback, shared by the publish tests, and a fresh bucket per test."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # publish_helpers
from publish_helpers import moto_s3_server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a real S3 API (moto's server) with dummy credentials in the environment."""
    with moto_s3_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_client(s3_server: str) -> Any:
    import boto3  # heavy, and only with the remote extra

    return boto3.client("s3", endpoint_url=s3_server)


@pytest.fixture
def bucket(s3_client: Any) -> str:
    """A new, empty bucket for one test."""
    name = f"b{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name
