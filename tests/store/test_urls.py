"""Every URL form the package takes, parsed in ``store/urls.py``, and written back in Triton's form."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from repo_builder.errors import MissingDependencyError, UserError
from repo_builder.store.for_triton import remote_repository, triton_s3_url
from repo_builder.store.fsspec_store import filesystem_options, open_store
from repo_builder.store.placeholders import PLACEHOLDER_TEXT, placeholder_key
from repo_builder.store.urls import StoreUrl, is_remote, names_url, parse_store_url, parse_validated_url

NO_ENV: dict[str, str] = {}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://bucket/a/b", StoreUrl("s3", "bucket", "a/b")),
        ("s3://bucket", StoreUrl("s3", "bucket", "")),
        ("s3://bucket/a/b/", StoreUrl("s3", "bucket", "a/b")),
        ("s3://127.0.0.1:9000/bucket/m", StoreUrl("s3", "bucket", "m", "http://127.0.0.1:9000")),
        ("s3://https://minio.local:443/bucket/m", StoreUrl("s3", "bucket", "m", "https://minio.local:443")),
        ("s3://http://minio:9000/bucket", StoreUrl("s3", "bucket", "", "http://minio:9000")),
        ("gs://bucket/models", StoreUrl("gs", "bucket", "models")),
        ("az://container/models", StoreUrl("az", "container", "models")),
        ("as://account/container/models", StoreUrl("az", "container", "models", account="account")),
    ],
)
def test_parse_store_url_reads_every_form_when_given_one(url: str, expected: StoreUrl) -> None:
    assert parse_store_url(url, environ=NO_ENV) == expected


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("http://host/bucket", "not an object store URL"),
        ("bucket/prefix", "not an object store URL"),
        ("s3://Bad_Bucket/p", "not a valid bucket name"),
        ("s3:///p", "no bucket in the URL"),
        ("s3://bucket/a/../b", "'..' parts"),
        ("s3://key:secret@bucket/p", "credentials in the URL are never used"),
    ],
)
def test_parse_store_url_raises_one_line_user_error_when_url_is_bad(url: str, needle: str) -> None:
    with pytest.raises(UserError) as info:
        parse_store_url(url, environ=NO_ENV)
    assert needle in str(info.value) and "\n" not in str(info.value)
    assert "secret" not in str(info.value)


def test_parse_store_url_refuses_endpoint_when_it_carries_credentials() -> None:
    with pytest.raises(UserError) as info:
        parse_store_url("s3://bucket/p", "http://key:secret@127.0.0.1:9000")
    assert "secret" not in str(info.value) and "never used" in str(info.value)


def test_parse_store_url_takes_the_endpoint_from_the_environment_when_none_is_given() -> None:
    env = {"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "http://b:2"}
    assert parse_store_url("s3://bucket/p", environ=env).endpoint_url == "http://b:2"
    assert parse_store_url("s3://bucket/p", "http://c:3", environ=env).endpoint_url == "http://c:3"
    assert parse_store_url("s3://d:4/bucket/p", "http://c:3", environ=env).endpoint_url == "http://d:4"
    assert parse_store_url("gs://bucket/p", environ=env).endpoint_url is None


@pytest.mark.parametrize(
    "url",
    [
        "s3://bucket/models",
        "s3://127.0.0.1:9000/bucket/models",
        "s3://https://minio.local:8443/bucket/models",
        "gs://bucket/models",
        "as://account/container/models",
    ],
)
def test_triton_url_is_the_form_triton_was_given_when_parsed_back(url: str) -> None:
    location = parse_store_url(url, environ=NO_ENV)
    assert location.triton_url(NO_ENV) == url
    assert parse_store_url(location.triton_url(NO_ENV), environ=NO_ENV) == location


def test_triton_url_adds_the_default_port_when_the_endpoint_has_none() -> None:
    # Triton's regex needs host:port: an endpoint without a port gets its scheme's.
    assert parse_store_url("s3://b/m", "https://minio.local").triton_url() == "s3://https://minio.local:443/b/m"
    assert parse_store_url("s3://b/m", "http://minio").triton_url() == "s3://minio:80/b/m"
    assert triton_s3_url("s3://bucket/m", "https://minio.local") == "s3://https://minio.local:443/bucket/m"


def test_triton_url_problem_is_named_when_the_prefix_has_characters_triton_refuses() -> None:
    assert parse_store_url("s3://b/ok_prefix-1.x", "http://h:1").triton_url_problem() is None
    problem = parse_store_url("s3://b/with space", "http://h:1").triton_url_problem()
    assert problem is not None and "Triton cannot parse" in problem
    assert parse_store_url("s3://b/with space", environ=NO_ENV).triton_url_problem() is None  # AWS: no regex


def test_remote_repository_needs_the_azure_account_when_the_url_has_none() -> None:
    with pytest.raises(UserError, match="storage account"):
        remote_repository("az://container/m", environ=NO_ENV)
    assert remote_repository("az://container/m", environ={"AZURE_STORAGE_ACCOUNT_NAME": "acct"}).url == "as://acct/container/m"
    assert remote_repository("gs://bucket/m", environ=NO_ENV).url == "gs://bucket/m"


def test_remote_repository_gives_the_server_a_region_when_the_environment_has_none() -> None:
    assert remote_repository("s3://bucket/m", environ=NO_ENV).environment == (("AWS_DEFAULT_REGION", "us-east-1"),)
    assert remote_repository("s3://bucket/m", environ={"AWS_REGION": "eu-west-1"}).environment == (
        ("AWS_DEFAULT_REGION", "eu-west-1"),
    )
    assert remote_repository("s3://bucket/m", environ={"AWS_DEFAULT_REGION": "x"}).environment == ()


@pytest.mark.parametrize(
    ("location", "remote", "url"),
    [
        ("s3://bucket/p", True, True),
        (Path("s3://bucket/p"), False, True),  # pathlib collapsed '//': still refused as --out
        ("models/", False, False),
        ("C:/models", False, False),
        ("./s3:x", False, False),
    ],
)
def test_is_remote_and_names_url_tell_urls_from_folders_when_given_either(location: str | Path, remote: bool, url: bool) -> None:
    assert is_remote(location) is remote
    assert names_url(str(location)) is url


def test_parse_validated_url_refuses_schemes_validate_does_not_read_when_given_one() -> None:
    with pytest.raises(UserError, match="only local folders and s3:// URLs can be validated"):
        parse_validated_url("gs://bucket/models")
    assert parse_validated_url("s3://bucket/models").protocol == "s3"


def test_filesystem_options_carry_timeouts_and_endpoint_when_the_store_is_s3() -> None:
    options = filesystem_options(parse_store_url("s3://b/p", "http://h:9"))
    assert options["client_kwargs"] == {"endpoint_url": "http://h:9"}
    assert options["config_kwargs"]["retries"] == {"max_attempts": 1}
    assert filesystem_options(parse_store_url("as://acct/c/p"))["account_name"] == "acct"


@pytest.mark.skipif(importlib.util.find_spec("gcsfs") is not None, reason="gcsfs is installed here")
def test_open_store_names_the_extra_to_install_when_gcsfs_is_missing() -> None:
    with pytest.raises(MissingDependencyError, match=r"gcsfs.*repo-builder\[gcs\]"):
        open_store(parse_store_url("gs://bucket/models"))


def test_placeholder_key_lies_in_the_folder_it_keeps_when_made() -> None:
    assert placeholder_key("pipeline/1") == "pipeline/1/placeholder.txt"
    assert PLACEHOLDER_TEXT.endswith(b"\n")
