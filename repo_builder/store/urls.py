"""Where a repository lives, as a URL: every scheme the package knows, parsed here and nowhere else.

Forms accepted: ``s3://bucket/prefix``, Triton's S3 form with an endpoint ``s3://host:port/bucket/prefix``
and ``s3://https://host:port/...`` (core ``src/filesystem/implementations/s3.h``: ``s3_regex_``; no scheme
means HTTP), ``gs://bucket/prefix``, ``az://container/prefix`` and Triton's Azure form
``as://account/container/prefix``. What a user copies from a server's command line works here too, and
``triton_url`` writes the form Triton needs back.

Light: no third-party imports (``repo-builder validate`` of a local folder loads this module).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from repo_builder.errors import UserError
from repo_builder.redact import redact


@dataclass(frozen=True)
class Scheme:
    """One storage scheme: fsspec's protocol, Triton's name for it, and what provides it."""

    protocol: str  # fsspec's name, and ours in StoreUrl.protocol
    triton: str  # Triton's scheme for --model-repository
    package: str  # the fsspec implementation (imported only when a store is opened)
    extra: str  # the pip extra that installs it
    validated: bool  # `validate URL` reads it through a local mirror (tested against moto's S3)


SCHEMES: tuple[Scheme, ...] = (
    Scheme("s3", "s3", "s3fs", "remote", validated=True),
    Scheme("gs", "gs", "gcsfs", "gcs", validated=False),
    Scheme("az", "as", "adlfs", "azure", validated=False),
)
_BY_NAME = {s.protocol: s for s in SCHEMES} | {s.triton: s for s in SCHEMES}
S3 = _BY_NAME["s3"]
AZURE = _BY_NAME["az"]

# Triton's S3 form with an endpoint: s3://[http(s)://]host:port/bucket/path (core filesystem s3.h)
_TRITON_S3 = re.compile(r"^s3://(?P<scheme>https?://)?(?P<host>[0-9A-Za-z.\-]+):(?P<port>[0-9]+)/(?P<rest>.*)$")
# What that regex accepts after host:port: a bucket, then path parts of these characters only.
_TRITON_S3_PATH = re.compile(r"^[0-9a-z.\-]+(/[0-9a-zA-Z.\-_]+)*$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{0,254}$")
# Any scheme, also after pathlib collapsed '//' (Path("s3://b/p") is "s3:/b/p"); two letters at least, so
# a drive letter (C:/) is a path.
_ANY_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:/")
_CREDENTIALS_HINT = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) instead"


def is_remote(location: object) -> bool:
    """Whether ``location`` (a str or a Path) names a URL rather than a local folder."""
    return "://" in str(location)


def names_url(text: str) -> bool:
    """Whether ``text`` starts like a URL, also once pathlib has made ``s3://`` into ``s3:/``."""
    return _ANY_URL.match(text) is not None


def scheme_list(validated_only: bool = False) -> str:
    """``s3://, gs://, az://`` (for messages)."""
    return ", ".join(f"{s.protocol}://" for s in SCHEMES if s.validated or not validated_only)


@dataclass(frozen=True)
class StoreUrl:
    """Where a repository lives: protocol, bucket (or container), prefix and, for S3, the endpoint."""

    protocol: str  # s3 | gs | az (Scheme.protocol)
    bucket: str
    prefix: str  # without leading or trailing slashes; "" for the bucket's root
    endpoint_url: str | None = None  # S3-compatible stores (MinIO, moto): http(s)://host:port
    account: str | None = None  # Azure: the storage account (Triton's as://account/container/path)

    @property
    def scheme(self) -> Scheme:
        return _BY_NAME[self.protocol]

    @property
    def base(self) -> str:
        """``bucket/prefix``: fsspec's path of the repository's root."""
        return f"{self.bucket}/{self.prefix}" if self.prefix else self.bucket

    @property
    def url(self) -> str:
        return f"{self.protocol}://{self.base}"

    def key(self, relative: str) -> str:
        return f"{self.base}/{relative}"

    def url_of(self, relative: str) -> str:
        return f"{self.url}/{relative}"

    def triton_url(self, environ: Mapping[str, str] | None = None) -> str:
        """The exact ``--model-repository`` value Triton needs for this location."""
        if self.scheme is S3 and self.endpoint_url:
            return f"s3://{_triton_endpoint(self.endpoint_url)}/{self.base}"
        if self.scheme is AZURE:
            env = os.environ if environ is None else environ
            account = self.account or env.get("AZURE_STORAGE_ACCOUNT_NAME") or "<account>"
            return f"as://{account}/{self.base}"
        return f"{self.scheme.triton}://{self.base}"

    def triton_url_problem(self) -> str | None:
        """Why Triton could not parse ``triton_url()`` (its S3 regex is narrow), else None."""
        if self.scheme is S3 and self.endpoint_url and not _TRITON_S3_PATH.match(self.base):
            return (
                f"Triton cannot parse {self.triton_url()}: with an endpoint it accepts only a-z 0-9 . - in the "
                "bucket and A-Z a-z 0-9 . - _ in the prefix; publish to a simpler prefix"
            )
        return None

    def triton_environment(self) -> tuple[str, ...]:
        """Names of the environment variables Triton reads to reach this store (never their values)."""
        if self.scheme is S3:
            return ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN (temporary credentials)")
        if self.scheme is AZURE:
            return ("AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY")
        return ("GOOGLE_APPLICATION_CREDENTIALS",)

    def require_validated(self) -> StoreUrl:
        """``self`` when offline validate can read this scheme, else a one-line ``UserError``."""
        if not self.scheme.validated:
            raise UserError(f"{self.url}: only local folders and {scheme_list(validated_only=True)} URLs can be validated")
        return self


def _triton_endpoint(endpoint_url: str) -> str:
    """``http://h:9000`` -> ``h:9000``, ``https://h`` -> ``https://h:443``: Triton's host:port part."""
    endpoint = urlsplit(endpoint_url)
    if endpoint.scheme not in ("http", "https") or not endpoint.hostname:
        raise UserError(f"--s3-endpoint {redact(endpoint_url)}: use http://HOST:PORT or https://HOST:PORT")
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    lead = "https://" if endpoint.scheme == "https" else ""
    return f"{lead}{endpoint.hostname}:{port}"


def endpoint_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint the AWS tools would use (``AWS_ENDPOINT_URL_S3`` wins over ``AWS_ENDPOINT_URL``)."""
    env = os.environ if environ is None else environ
    return env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None


def parse_store_url(url: str, endpoint_url: str | None = None, environ: Mapping[str, str] | None = None) -> StoreUrl:
    """Parse ``s3://bucket/prefix``, Triton's ``s3://host:port/bucket/prefix``, ``gs://``, ``az://``/``as://``.

    ``endpoint_url`` (else ``AWS_ENDPOINT_URL`` in ``environ``, default the process's) applies to S3; an
    endpoint in the URL wins.
    """
    shown = redact(url)  # every message below quotes the URL: never its credentials
    match = _TRITON_S3.match(url)
    if match:
        endpoint_url = f"{match['scheme'] or 'http://'}{match['host']}:{match['port']}"
        scheme, rest = S3, match["rest"]
    else:
        name, sep, rest = url.partition("://")
        if not sep or name not in _BY_NAME:
            raise UserError(f"{shown}: not an object store URL; write s3://bucket/prefix (or gs://, az://)")
        scheme = _BY_NAME[name]
    account = None
    if scheme is AZURE and url.startswith(f"{AZURE.triton}://"):  # Triton's Azure form: as://account/container/path
        account, _, rest = rest.partition("/")
    bucket, _, prefix = rest.partition("/")
    if "@" in bucket:
        raise UserError(f"{shown}: credentials in the URL are never used (nor printed); {_CREDENTIALS_HINT}")
    if not bucket:
        raise UserError(f"{shown}: no bucket in the URL; write {scheme.protocol}://bucket/prefix")
    if scheme is S3 and not _BUCKET.match(bucket):
        raise UserError(f"{shown}: '{bucket}' is not a valid bucket name (lower-case letters, digits, '.', '-')")
    prefix = prefix.strip("/")
    if prefix and any(part in ("", ".", "..") for part in prefix.split("/")):
        raise UserError(f"{shown}: the prefix may not contain empty, '.' or '..' parts")
    if scheme is S3 and endpoint_url is None:
        endpoint_url = endpoint_from_env(environ)
    if endpoint_url and redact(endpoint_url) != endpoint_url:
        raise UserError(
            f"{redact(endpoint_url)}: credentials in the endpoint URL are never used (nor printed); {_CREDENTIALS_HINT}"
        )
    return StoreUrl(scheme.protocol, bucket, prefix, endpoint_url.rstrip("/") if endpoint_url else None, account)


def parse_validated_url(url: str, endpoint_url: str | None = None) -> StoreUrl:
    """``parse_store_url`` for offline validate: only the schemes it reads (``Scheme.validated``)."""
    return parse_store_url(url, endpoint_url).require_validated()
