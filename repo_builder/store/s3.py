"""What S3 (and S3-compatible stores: MinIO, moto) needs beyond fsspec's common calls: s3fs's client
options (our timeouts, botocore's own retries off, the endpoint) and the sha256 each uploaded object
carries in its user metadata (``x-amz-meta-sha256``), which publish compares and pull verifies.
"""

from __future__ import annotations

from typing import Any

from repo_builder.store.deadline import request_timeouts
from repo_builder.store.urls import StoreUrl

SHA256_KEY = "sha256"  # user metadata each uploaded object carries (x-amz-meta-sha256 on S3)


def filesystem_options(location: StoreUrl) -> dict[str, Any]:
    """s3fs's options for ``location``."""
    # Retries are ours (retries.with_retries): botocore's own loop would multiply them. The timeouts
    # follow the command's --timeout (deadline.request_timeouts).
    connect, read = request_timeouts()
    options: dict[str, Any] = {
        "config_kwargs": {"connect_timeout": connect, "read_timeout": read, "retries": {"max_attempts": 1}}
    }
    if location.endpoint_url:
        options["client_kwargs"] = {"endpoint_url": location.endpoint_url}
    return options


def checksum_arguments(sha256: str) -> dict[str, Any]:
    """Keyword arguments of s3fs's put calls that store ``sha256`` with the object."""
    return {"Metadata": {SHA256_KEY: sha256}}


def read_checksum(fs: Any, key: str) -> str | None:
    """The sha256 recorded in the object's metadata at upload, else None."""
    value = fs.metadata(key, refresh=True).get(SHA256_KEY)
    return value if isinstance(value, str) else None
