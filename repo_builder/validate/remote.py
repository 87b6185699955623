"""Validate a repository in an object store (``s3://bucket/prefix``) by mirroring what the rules read.

The listing is mirrored in full (folders and file names, so the layout rules see what Triton sees), but
only small files are downloaded: configs, Python models, labels, sidecars, and ONNX files up to a limit.
Everything else becomes an empty placeholder while the scanned entry keeps its real size, so rules that
need such a file say so instead of misreading it. Object stores have no empty folders: a version folder
without a file in it does not exist there, exactly as Triton sees it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any

from repo_builder.errors import UserError, require
from repo_builder.validate.records import FileEntry, ModelEntry, Repository
from repo_builder.validate.scan import CONFIG_FILE, MAX_CONFIG_BYTES, scan_repository

SMALL_FILE_BYTES = 1 << 20  # labels, sidecars, recipes: always fetched
MAX_PYTHON_BYTES = 16 << 20
DEFAULT_MAX_ONNX_BYTES = 16 << 20


def is_remote(location: str) -> bool:
    return "://" in location


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> (``bucket``, ``a/b``); other schemes are a user error."""
    scheme, _, rest = url.partition("://")
    if scheme != "s3":
        raise UserError(f"{url}: only local folders and s3:// URLs can be validated")
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise UserError(f"{url}: no bucket in the URL; write s3://bucket/prefix")
    return bucket, prefix.strip("/")


def endpoint_from_env() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def wanted(relative: str, size: int, max_onnx_bytes: int) -> bool:
    """Whether a file is worth downloading for the rules (by name and size)."""
    name = PurePosixPath(relative).name
    if name == CONFIG_FILE:
        return size <= MAX_CONFIG_BYTES
    if name.endswith(".py"):
        return size <= MAX_PYTHON_BYTES
    if name.endswith(".onnx") or "model.onnx/" in relative:
        return size <= max_onnx_bytes
    return size <= SMALL_FILE_BYTES


def _filesystem(endpoint_url: str | None) -> Any:
    s3fs = require("s3fs", "remote", "validating an s3:// repository")
    client_kwargs = {"endpoint_url": endpoint_url} if endpoint_url else {}
    return s3fs.S3FileSystem(client_kwargs=client_kwargs, skip_instance_cache=True)


def _list(fs: Any, url: str, base: str) -> dict[str, dict[str, Any]]:
    try:
        found = fs.find(base, withdirs=True, detail=True)
    except FileNotFoundError:
        raise UserError(f"{url}: no such bucket or prefix") from None
    except PermissionError as exc:
        raise UserError(f"{url}: access denied ({exc}); check the AWS credentials") from None
    except OSError as exc:
        raise UserError(f"{url}: cannot list the repository: {exc}") from None
    except Exception as exc:  # botocore raises its own types for endpoints and credentials
        raise UserError(f"{url}: cannot list the repository: {type(exc).__name__}: {exc}") from None
    return found


@contextmanager
def mirror_repository(
    url: str, endpoint_url: str | None = None, max_onnx_bytes: int = DEFAULT_MAX_ONNX_BYTES
) -> Iterator[Repository]:
    """Scan an ``s3://`` repository through a temporary local mirror (removed on exit).

    The scanned ``Repository`` has ``location`` = ``url`` and the remote sizes in its file entries.
    """
    bucket, prefix = split_url(url)
    fs = _filesystem(endpoint_url or endpoint_from_env())
    base = f"{bucket}/{prefix}" if prefix else bucket
    listing = _list(fs, url, base)
    entries = {k.rstrip("/"): v for k, v in listing.items() if k.rstrip("/") != base}
    if not entries:
        raise UserError(f"{url}: no objects under this prefix (is the URL right?)")
    tmp = Path(tempfile.mkdtemp(prefix="repo-builder-s3-"))
    try:
        root = tmp / "repository"
        root.mkdir()
        sizes: dict[str, int] = {}
        remote, local = [], []
        for key, info in sorted(entries.items()):
            relative = key[len(base) + 1 :] if key.startswith(base + "/") else key
            if not relative or ".." in PurePosixPath(relative).parts:
                continue
            target = root.joinpath(*PurePosixPath(relative).parts)
            try:
                if info.get("type") == "directory":
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                size = int(info.get("size") or 0)
                target.parent.mkdir(parents=True, exist_ok=True)
                if wanted(relative, size, max_onnx_bytes):
                    target.touch()
                    remote.append(key)
                    local.append(str(target))
                elif PurePosixPath(relative).name == CONFIG_FILE:
                    with open(target, "wb") as fh:  # sparse: the scan reports the size, nothing is read
                        fh.truncate(size)
                else:
                    target.touch()
            except OSError:
                continue  # a key that cannot be a local path (a "file" that is also a folder): skip it
            sizes[relative] = size
        if remote:
            try:
                fs.get(remote, local)
            except Exception as exc:  # network and permission failures surface as many types
                raise UserError(f"{url}: cannot download from the repository: {type(exc).__name__}: {exc}") from None
        repository = scan_repository(root)
        yield _with_remote_sizes(repository, url, sizes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _with_remote_sizes(repository: Repository, url: str, sizes: dict[str, int]) -> Repository:
    """Put the listed sizes back on entries whose content was not downloaded."""
    root = repository.root

    def fix(folder: Path, files: tuple[FileEntry, ...]) -> tuple[FileEntry, ...]:
        out = []
        for f in files:
            if not f.is_dir:
                relative = (folder / f.name).relative_to(root).as_posix()
                size = sizes.get(relative)
                if size is not None and size != f.size:
                    f = replace(f, size=size)
            out.append(f)
        return tuple(out)

    def fix_model(m: ModelEntry) -> ModelEntry:
        versions = tuple(replace(v, files=fix(v.path, v.files)) for v in m.versions)
        return replace(m, files=fix(m.path, m.files), versions=versions)

    return replace(repository, models=tuple(fix_model(m) for m in repository.models), location=url)
