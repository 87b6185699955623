"""An object store prefix (``s3://bucket/prefix``, ``gs://``, ``az://``) as publish, pull and validate use it.

URLs are parsed here once, including Triton's own form for S3-compatible stores,
``s3://host:port/bucket/prefix`` (and ``s3://https://host:port/...``), so what a user copies from a
server's command line works here too. Access goes through fsspec (``s3fs``, ``gcsfs``, ``adlfs``),
imported inside ``open_store`` only: ``repo-builder validate`` of a local folder must not pay for it.

Failures become the package's error roots: a bad URL or a missing bucket is the user's (exit 2), a
network or store failure that outlived the retries is the environment's (exit 3).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from repo_builder.errors import ToolError, UserError, require
from repo_builder.redact import redact

T = TypeVar("T")
# fsspec protocol -> the extra/package that provides it
_PROTOCOLS = {"s3": ("s3fs", "remote"), "gs": ("gcsfs", "remote"), "az": ("adlfs", "remote")}
_TRITON_SCHEME = {"s3": "s3", "gs": "gs", "az": "as"}
# Triton's S3 form with an endpoint: s3://[http(s)://]host:port/bucket/path (core filesystem s3.h)
_TRITON_S3 = re.compile(r"^s3://(?P<scheme>https?://)?(?P<host>[0-9A-Za-z.\-]+):(?P<port>[0-9]+)/(?P<rest>.*)$")
# What that regex accepts after host:port: a bucket, then path parts of these characters only.
_TRITON_S3_PATH = re.compile(r"^[0-9a-z.\-]+(/[0-9a-zA-Z.\-_]+)*$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{0,254}$")
SHA256_KEY = "sha256"  # user metadata each uploaded object carries (x-amz-meta-sha256 on S3)


@dataclass(frozen=True)
class StoreUrl:
    """Where a repository lives: protocol, bucket (or container), prefix and, for S3, the endpoint."""

    protocol: str  # s3 | gs | az
    bucket: str
    prefix: str  # without leading or trailing slashes; "" for the bucket's root
    endpoint_url: str | None = None  # S3-compatible stores (MinIO, moto): http(s)://host:port
    account: str | None = None  # Azure: the storage account (Triton's as://account/container/path)

    @property
    def base(self) -> str:
        """``bucket/prefix``: fsspec's path of the repository's root."""
        return f"{self.bucket}/{self.prefix}" if self.prefix else self.bucket

    @property
    def url(self) -> str:
        return f"{self.protocol}://{self.base}"

    def key(self, relative: str) -> str:
        return f"{self.base}/{relative}"

    def triton_url(self) -> str:
        """The exact ``--model-repository`` value Triton needs for this location."""
        if self.protocol == "s3" and self.endpoint_url:
            scheme, _, hostport = self.endpoint_url.partition("://")
            hostport = hostport.rstrip("/")
            lead = "https://" if scheme == "https" else ""
            return f"s3://{lead}{hostport}/{self.base}"
        if self.protocol == "az":
            account = self.account or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME") or "<account>"
            return f"as://{account}/{self.base}"
        return f"{_TRITON_SCHEME[self.protocol]}://{self.base}"

    def triton_url_problem(self) -> str | None:
        """Why Triton could not parse ``triton_url()`` (its S3 regex is narrow), else None."""
        if self.protocol == "s3" and self.endpoint_url and not _TRITON_S3_PATH.match(self.base):
            return (
                f"Triton cannot parse {self.triton_url()}: with an endpoint it accepts only a-z 0-9 . - in the "
                "bucket and A-Z a-z 0-9 . - _ in the prefix; publish to a simpler prefix"
            )
        return None

    def triton_environment(self) -> tuple[str, ...]:
        """Names of the environment variables Triton reads to reach this store (never their values)."""
        if self.protocol == "s3":
            return ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_SESSION_TOKEN (temporary credentials)")
        if self.protocol == "gs":
            return ("GOOGLE_APPLICATION_CREDENTIALS",)
        return ("AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY")


def endpoint_from_env() -> str | None:
    """The S3 endpoint the AWS tools would use (``AWS_ENDPOINT_URL_S3`` wins over ``AWS_ENDPOINT_URL``)."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def is_remote(location: str) -> bool:
    return "://" in str(location)


def parse_store_url(url: str, endpoint_url: str | None = None) -> StoreUrl:
    """Parse ``s3://bucket/prefix``, Triton's ``s3://host:port/bucket/prefix``, ``gs://``, ``az://``/``as://``.

    ``endpoint_url`` (else ``AWS_ENDPOINT_URL``) applies to S3; an endpoint in the URL wins.
    """
    shown = redact(url)  # every message below quotes the URL: never its credentials
    match = _TRITON_S3.match(url)
    if match:
        scheme = match["scheme"] or "http://"
        endpoint_url = f"{scheme}{match['host']}:{match['port']}"
        protocol, rest = "s3", match["rest"]
    else:
        protocol, sep, rest = url.partition("://")
        if not sep or protocol not in ("s3", "gs", "az", "as"):
            raise UserError(f"{shown}: not an object store URL; write s3://bucket/prefix (or gs://, az://)")
    account = None
    if protocol == "as":  # Triton's Azure form: as://account/container/path
        account, _, rest = rest.partition("/")
        protocol = "az"
    bucket, _, prefix = rest.partition("/")
    if "@" in bucket:
        raise UserError(
            f"{shown}: credentials in the URL are never used (nor printed); set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) instead"
        )
    if not bucket:
        raise UserError(f"{shown}: no bucket in the URL; write {protocol}://bucket/prefix")
    if protocol == "s3" and not _BUCKET.match(bucket):
        raise UserError(f"{shown}: '{bucket}' is not a valid bucket name (lower-case letters, digits, '.', '-')")
    prefix = prefix.strip("/")
    if any(part in ("", ".", "..") for part in prefix.split("/")) and prefix:
        raise UserError(f"{shown}: the prefix may not contain empty, '.' or '..' parts")
    if protocol == "s3" and endpoint_url is None:
        endpoint_url = endpoint_from_env()
    if endpoint_url and redact(endpoint_url) != endpoint_url:
        raise UserError(
            f"{redact(endpoint_url)}: credentials in the endpoint URL are never used (nor printed); set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) instead"
        )
    return StoreUrl(protocol, bucket, prefix, endpoint_url.rstrip("/") if endpoint_url else None, account)


# -- timeouts ------------------------------------------------------------------------------------------
# Every store call has a connect and a read timeout (botocore's, per request) and the whole command a
# deadline (``--timeout``): retries, backoff and calls that hang add up to at most what the user asked for.
DEFAULT_STORE_TIMEOUT = 900.0  # seconds for one command's store traffic (publish of a few GB fits)
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("store_deadline", default=None)
_TIMEOUT: contextvars.ContextVar[float] = contextvars.ContextVar("store_timeout", default=DEFAULT_STORE_TIMEOUT)


@contextlib.contextmanager
def store_deadline(seconds: float) -> Iterator[None]:
    """Every store opened inside gives up ``seconds`` after entering (one command's ``--timeout``)."""
    deadline = _DEADLINE.set(time.monotonic() + seconds)
    timeout = _TIMEOUT.set(seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(deadline)
        _TIMEOUT.reset(timeout)


@dataclass(frozen=True)
class Deadline:
    """When a store's calls must have finished (``time.monotonic()``), and the ``--timeout`` it came from."""

    at: float
    seconds: float
    endpoint: str  # for the message: the store's endpoint, credentials redacted

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def expired(self, what: str) -> ToolError:
        return ToolError(
            f"{what}: the store at {self.endpoint} did not finish within {self.seconds:g} s (--timeout); check "
            "that the endpoint is the store's and answers, or raise --timeout"
        )


def current_deadline(endpoint: str) -> Deadline:
    """The deadline of the command running now (``store_deadline``), else the default from now."""
    seconds = _TIMEOUT.get()
    at = _DEADLINE.get()
    return Deadline(time.monotonic() + seconds if at is None else at, seconds, endpoint)


def call_before(action: Callable[[], T], deadline: Deadline, what: str) -> T:
    """Run ``action``, giving up at the deadline even when the call hangs (a server that accepts and never
    answers): it runs in a daemon thread, left to its own read timeout, so the process can exit."""
    remaining = deadline.remaining()
    if remaining <= 0:
        raise deadline.expired(what)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = action()
        except BaseException as exc:  # handed to the caller's thread as is
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="repo-builder-store-call", daemon=True)
    worker.start()
    worker.join(remaining)
    if worker.is_alive():
        raise deadline.expired(what)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


# -- retries -------------------------------------------------------------------------------------------
def is_transient(exc: BaseException) -> bool:
    """Worth another try: connection and timeout failures, throttling and 5xx answers, not 403/404."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    name = type(exc).__name__
    if any(s in name for s in ("EndpointConnection", "ConnectionClosed", "ReadTimeout", "ConnectTimeout", "ClientConnector")):
        return True
    text = str(exc)
    if any(s in text for s in ("SlowDown", "Throttl", "InternalError", "ServiceUnavailable", "RequestTimeout", "503", "500")):
        return True
    return isinstance(exc, OSError) and exc.errno is None and "Access Denied" not in text


def with_retries(action: Callable[[], T], what: str, attempts: int = 4, base_delay: float = 0.5,
                 sleep: Callable[[float], None] = time.sleep, deadline: Deadline | None = None) -> T:
    """Run ``action``; on a transient failure wait (exponential backoff with jitter) and try again.

    The last failure, or the first that is not transient, is raised as a one-line error naming ``what``.
    With a ``deadline``, each attempt is cut at it and no backoff outlasts it.
    """
    for attempt in range(1, attempts + 1):
        try:
            return action() if deadline is None else call_before(action, deadline, what)
        except Exception as exc:  # network stacks raise many types; is_transient sorts them
            if isinstance(exc, ToolError):
                raise  # the deadline passed: another attempt has no time left
            if attempt < attempts and is_transient(exc):
                delay = base_delay * (2 ** (attempt - 1)) * (1 + random.random() / 4)
                if deadline is not None and delay >= deadline.remaining():
                    raise deadline.expired(what) from None
                sleep(delay)
                continue
            raise store_error(exc, what, attempt) from None
    raise AssertionError("unreachable")


def store_error(exc: BaseException, what: str, attempts: int = 1) -> UserError | ToolError:
    """The error root for a failure: the user's (missing bucket/object) or the environment's."""
    detail = redact(str(exc).splitlines()[0]) if str(exc) else type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return UserError(f"{what}: not found ({detail}); check the bucket and prefix")
    if "NoCredentials" in type(exc).__name__:
        return ToolError(f"{what}: no credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)")
    if isinstance(exc, PermissionError) or "AccessDenied" in detail or "Access Denied" in detail:
        return ToolError(f"{what}: access denied; check the credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE ...)")
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return ToolError(f"{what}: the object store failed{tries}: {type(exc).__name__}: {detail}")


# -- access --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RemoteFile:
    relative: str  # path below the prefix, '/'-separated
    size: int


@dataclass(frozen=True)
class Listing:
    """What is below a prefix: objects, and folders (implied by keys, or explicit ``folder/`` markers)."""

    files: dict[str, RemoteFile]
    folders: frozenset[str]


class ObjectStore:
    """The files below one prefix, through an fsspec filesystem; every call retried on transient errors."""

    def __init__(self, location: StoreUrl, fs: Any, attempts: int = 4, base_delay: float = 0.5,
                 deadline: Deadline | None = None) -> None:
        self.location = location
        self.fs = fs
        self.attempts = attempts
        self.base_delay = base_delay
        self.deadline = deadline or current_deadline(redact(location.endpoint_url or location.url))

    def _retry(self, action: Callable[[], T], what: str) -> T:
        return with_retries(action, what, self.attempts, self.base_delay, deadline=self.deadline)

    def listing(self) -> Listing:
        """Everything below the prefix (empty when there is nothing); a missing bucket is the user's error."""
        base = self.location.base

        def find() -> dict[str, Any]:
            try:
                return self.fs.find(base, withdirs=True, detail=True, refresh=True)
            except FileNotFoundError:
                if not self.fs.exists(self.location.bucket):
                    raise
                return {}

        found = self._retry(find, self.location.url)
        files, folders = {}, set()
        for key, info in found.items():
            key = key.rstrip("/")
            if not key.startswith(base + "/"):
                continue
            relative = key[len(base) + 1 :]
            if info.get("type") == "directory":
                folders.add(relative)
            else:
                files[relative] = RemoteFile(relative, int(info.get("size") or 0))
        return Listing(files, frozenset(folders))

    def list_files(self) -> dict[str, RemoteFile]:
        return self.listing().files

    def get_files(self, pairs: list[tuple[str, Path]]) -> None:
        """Download many objects at once (fsspec runs them concurrently)."""
        if pairs:
            remote = [self.location.key(r) for r, _ in pairs]
            local = [str(p) for _, p in pairs]
            self._retry(lambda: self.fs.get(remote, local), self.location.url)

    def sha256(self, relative: str) -> str | None:
        """The sha256 recorded in the object's metadata at upload (S3), else None."""
        if self.location.protocol != "s3":
            return None
        meta = self._retry(lambda: self.fs.metadata(self.location.key(relative), refresh=True), self.url_of(relative))
        return meta.get(SHA256_KEY)

    def put_file(self, local: Path, relative: str, sha256: str) -> None:
        kwargs = {"Metadata": {SHA256_KEY: sha256}} if self.location.protocol == "s3" else {}
        self._retry(lambda: self.fs.put_file(str(local), self.location.key(relative), **kwargs), self.url_of(relative))

    def put_bytes(self, data: bytes, relative: str, sha256: str) -> None:
        kwargs = {"Metadata": {SHA256_KEY: sha256}} if self.location.protocol == "s3" else {}
        self._retry(lambda: self.fs.pipe_file(self.location.key(relative), data, **kwargs), self.url_of(relative))

    def read_bytes(self, relative: str) -> bytes:
        return self._retry(lambda: self.fs.cat_file(self.location.key(relative)), self.url_of(relative))

    def get_file(self, relative: str, local: Path) -> None:
        self._retry(lambda: self.fs.get_file(self.location.key(relative), str(local)), self.url_of(relative))

    def delete(self, relatives: Iterable[str]) -> None:
        for relative in relatives:
            self._retry(partial(self.fs.rm_file, self.location.key(relative)), self.url_of(relative))

    def url_of(self, relative: str) -> str:
        return f"{self.location.url}/{relative}"


def open_store(location: StoreUrl, attempts: int = 4, base_delay: float = 0.5) -> ObjectStore:
    """An ``ObjectStore`` for ``location``; the fsspec implementation is imported here (heavy, optional)."""
    package, extra = _PROTOCOLS[location.protocol]
    require(package, extra, f"reaching {location.protocol}:// repositories")
    fsspec = require("fsspec", extra, f"reaching {location.protocol}:// repositories")  # heavy: only here
    options: dict[str, Any] = {"skip_instance_cache": True}
    if location.protocol == "s3":
        # Retries are ours (with_retries): botocore's own loop would multiply them.
        options["config_kwargs"] = {
            "connect_timeout": CONNECT_TIMEOUT, "read_timeout": READ_TIMEOUT, "retries": {"max_attempts": 1}
        }
    if location.protocol == "s3" and location.endpoint_url:
        options["client_kwargs"] = {"endpoint_url": location.endpoint_url}
    if location.account:
        options["account_name"] = location.account
    try:
        fs = fsspec.filesystem(location.protocol, **options)
    except Exception as exc:  # credentials and configuration problems surface as many types
        raise ToolError(f"{location.url}: cannot open the object store: {type(exc).__name__}: {redact(str(exc))}") from None
    return ObjectStore(location, fs, attempts, base_delay)


# -- the publish record --------------------------------------------------------------------------------
# A file at the repository's root (Triton takes only folders as models): "publishing" while a publish
# changes the store, "complete" once it is whole. An interrupted publish leaves "publishing" behind, so a
# half-new repository is reported as such instead of passing for a new one.
PUBLISH_STATE_FILE = "repo-builder-publish.json"
STATE_PUBLISHING = "publishing"
STATE_COMPLETE = "complete"


def read_publish_state(store: ObjectStore, listing: Listing | None = None) -> dict[str, Any] | None:
    """The publish record below the prefix, or None when there is none (a repository put there by hand)."""
    files = (listing or store.listing()).files
    if PUBLISH_STATE_FILE not in files:
        return None
    raw = store.read_bytes(PUBLISH_STATE_FILE)
    try:
        data = json.loads(raw)
    except ValueError:
        return {"state": "unreadable"}
    return data if isinstance(data, dict) else {"state": "unreadable"}


def interrupted_publish(state: dict[str, Any] | None) -> str | None:
    """One sentence when the record says a publish did not finish, else None."""
    if state is None or state.get("state") == STATE_COMPLETE:
        return None
    started = state.get("started", "at an unknown time")
    return (
        f"a publish started {started} did not finish (its record says '{state.get('state')}'): the repository "
        "may mix old and new files; run the publish again"
    )
