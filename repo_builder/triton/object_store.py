"""Repositories in object storage, as tritonserver reads them directly.

Triton's S3 file system takes ``s3://bucket/path`` (AWS) or ``s3://[http://|https://]host:port/bucket/path``
for another endpoint (core ``src/filesystem/implementations/s3.h``: ``s3_regex_``; no scheme means HTTP),
and its credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION (and
AWS_SESSION_TOKEN, AWS_PROFILE) in its environment. ``--s3-endpoint``/``AWS_ENDPOINT_URL`` (what boto and
fsspec use) are turned into Triton's form here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from repo_builder.errors import UserError

REMOTE_SCHEMES = ("s3://", "gs://", "as://")
_TRITON_S3 = re.compile(r"s3://(?:https?://)?[0-9A-Za-z.\-]+:[0-9]+/.+")
DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class RemoteRepository:
    """What tritonserver gets: ``--model-repository`` and the environment it needs."""

    url: str
    environment: tuple[tuple[str, str], ...] = ()


def is_remote(location: object) -> bool:
    return isinstance(location, str) and "://" in location


def triton_s3_url(url: str, endpoint_url: str | None) -> str:
    """``s3://bucket/prefix`` with an endpoint as Triton's ``s3://host:port/bucket/prefix``."""
    if _TRITON_S3.fullmatch(url) or not endpoint_url:
        return url
    endpoint = urlsplit(endpoint_url)
    if endpoint.scheme not in ("http", "https") or not endpoint.hostname:
        raise UserError(f"--s3-endpoint {endpoint_url}: use http://HOST:PORT or https://HOST:PORT")
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    scheme = "https://" if endpoint.scheme == "https" else ""
    return f"s3://{scheme}{endpoint.hostname}:{port}/{url.removeprefix('s3://')}"


def remote_repository(
    url: str, endpoint_url: str | None = None, environ: Mapping[str, str] | None = None
) -> RemoteRepository:
    """The server's view of a remote repository URL (credentials come from ``environ``)."""
    env = os.environ if environ is None else environ
    if not url.startswith(REMOTE_SCHEMES):
        raise UserError(f"{url}: use s3://bucket/prefix (gs:// and as:// are passed to Triton as they are)")
    if not url.startswith("s3://"):
        return RemoteRepository(url)
    endpoint = endpoint_url or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    extra = {} if env.get("AWS_DEFAULT_REGION") else {"AWS_DEFAULT_REGION": env.get("AWS_REGION") or DEFAULT_REGION}
    return RemoteRepository(triton_s3_url(url, endpoint), tuple(sorted(extra.items())))
