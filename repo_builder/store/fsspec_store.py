"""Listing, reading and writing the objects below one prefix, for every scheme, through fsspec (``s3fs``,
``gcsfs``, ``adlfs``), imported inside ``open_store`` only: ``repo-builder validate`` of a local folder must
not pay for it. Every call has the command's deadline and is retried on transient errors; failures become
the package's error roots (``retries.store_error``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from repo_builder.errors import ToolError, require
from repo_builder.redact import redact
from repo_builder.store import s3
from repo_builder.store.deadline import Deadline, current_deadline
from repo_builder.store.retries import with_retries
from repo_builder.store.urls import S3, StoreUrl

T = TypeVar("T")


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
                found: dict[str, Any] = self.fs.find(base, withdirs=True, detail=True, refresh=True)
                return found
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
        """The sha256 recorded with the object at upload (S3 metadata), else None."""
        if self.location.scheme is not S3:
            return None
        return self._retry(partial(s3.read_checksum, self.fs, self.location.key(relative)), self.url_of(relative))

    def _checksum_arguments(self, sha256: str) -> dict[str, Any]:
        return s3.checksum_arguments(sha256) if self.location.scheme is S3 else {}

    def put_file(self, local: Path, relative: str, sha256: str) -> None:
        kwargs = self._checksum_arguments(sha256)
        self._retry(lambda: self.fs.put_file(str(local), self.location.key(relative), **kwargs), self.url_of(relative))

    def put_bytes(self, data: bytes, relative: str, sha256: str) -> None:
        kwargs = self._checksum_arguments(sha256)
        self._retry(lambda: self.fs.pipe_file(self.location.key(relative), data, **kwargs), self.url_of(relative))

    def read_bytes(self, relative: str) -> bytes:
        def cat() -> bytes:
            data: bytes = self.fs.cat_file(self.location.key(relative))
            return data

        return self._retry(cat, self.url_of(relative))

    def get_file(self, relative: str, local: Path) -> None:
        self._retry(lambda: self.fs.get_file(self.location.key(relative), str(local)), self.url_of(relative))

    def delete(self, relatives: Iterable[str]) -> None:
        for relative in relatives:
            self._retry(partial(self.fs.rm_file, self.location.key(relative)), self.url_of(relative))

    def url_of(self, relative: str) -> str:
        return self.location.url_of(relative)


def filesystem_options(location: StoreUrl) -> dict[str, Any]:
    """fsspec's options for ``location``: a fresh instance (credentials may change between commands)
    and the scheme's own."""
    options: dict[str, Any] = {"skip_instance_cache": True}
    if location.scheme is S3:
        options.update(s3.filesystem_options(location))
    if location.account:
        options["account_name"] = location.account
    return options


def open_store(location: StoreUrl, attempts: int = 4, base_delay: float = 0.5) -> ObjectStore:
    """An ``ObjectStore`` for ``location``; the fsspec implementation is imported here (heavy, optional)."""
    scheme = location.scheme
    purpose = f"reaching {scheme.protocol}:// repositories"
    require(scheme.package, scheme.extra, purpose)
    fsspec = require("fsspec", scheme.extra, purpose)  # heavy: only here
    try:
        fs = fsspec.filesystem(scheme.protocol, **filesystem_options(location))
    except Exception as exc:  # credentials and configuration problems surface as many types
        raise ToolError(f"{location.url}: cannot open the object store: {type(exc).__name__}: {redact(str(exc))}") from None
    return ObjectStore(location, fs, attempts, base_delay)
