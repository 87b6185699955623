"""A repository in object storage as tritonserver reads it itself (``serve``, ``validate --live``).

Triton takes the URL in its own form (``StoreUrl.triton_url``: ``s3://host:port/bucket/path`` for another
endpoint) and its credentials from its environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_DEFAULT_REGION (and AWS_SESSION_TOKEN, AWS_PROFILE) for S3, GOOGLE_APPLICATION_CREDENTIALS for GCS,
AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY for Azure. ``--s3-endpoint``/``AWS_ENDPOINT_URL`` (what boto
and fsspec use) are turned into Triton's form here; the server inherits the rest of the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from repo_builder.errors import UserError
from repo_builder.store.urls import AZURE, S3, endpoint_from_env, parse_store_url

DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class RemoteRepository:
    """What tritonserver gets: ``--model-repository`` and the environment it needs beside its own."""

    url: str
    environment: tuple[tuple[str, str], ...] = ()


def triton_s3_url(url: str, endpoint_url: str | None) -> str:
    """``s3://bucket/prefix`` with an endpoint as Triton's ``s3://host:port/bucket/prefix`` (an endpoint
    already in the URL wins)."""
    return parse_store_url(url, endpoint_url, environ={}).triton_url()


def remote_repository(
    url: str, endpoint_url: str | None = None, environ: Mapping[str, str] | None = None
) -> RemoteRepository:
    """The server's view of a remote repository URL (the endpoint and region come from ``environ``)."""
    env = os.environ if environ is None else environ
    location = parse_store_url(url, endpoint_url or endpoint_from_env(env), environ=env)
    if location.scheme is AZURE and not (location.account or env.get("AZURE_STORAGE_ACCOUNT_NAME")):
        raise UserError(f"{location.url}: Triton needs the storage account; write as://ACCOUNT/container/prefix")
    if location.scheme is not S3:
        return RemoteRepository(location.triton_url(env))
    extra = {} if env.get("AWS_DEFAULT_REGION") else {"AWS_DEFAULT_REGION": env.get("AWS_REGION") or DEFAULT_REGION}
    return RemoteRepository(location.triton_url(env), tuple(sorted(extra.items())))
