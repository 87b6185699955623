"""File helpers every writer shares: hashing, atomic file writes, and staging folders renamed into place.

Readers (Triton, validate, a later pipeline stage) must never see half a file or a half-filled folder, so
everything is written beside its target (same filesystem) and renamed over it. Light imports only:
``repo-builder validate`` imports this.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.guarded_read import SETTINGS, UnsafeFile, loads_json, read_repository_file
from repo_builder.safe_paths import refuse_system_folder


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (plans and ONNX files can be gigabytes)."""
    import hashlib  # stdlib, but ~3 ms at start-up: only hashing needs it

    digest = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write beside the target and rename over it, so a reader never sees half a file."""
    path = Path(path)
    # A unique name opened with "x" (not mkstemp): the file gets the umask's mode like any other written
    # file, not mkstemp's 0600 that a server running as another user could not read.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with tmp.open("xb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, data: Any, *, sort_keys: bool = False) -> None:
    """Indented JSON with a final newline, written atomically."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=sort_keys) + "\n")


def read_json_format(path: Path, version: int) -> dict[str, Any]:
    """A JSON object whose ``"format"`` is ``version``, read through the guarded reader (a regular file in
    its folder, bounded, nested at most ``guarded_read.MAX_JSON_DEPTH`` deep: recipes and sidecars sit in
    repositories).

    Raises OSError when unreadable (FileNotFoundError when missing) and ValueError when not JSON, not an
    object, another format or not a regular file; callers turn both into their own one-line UserError
    naming the file and how to rebuild it.
    """
    path = Path(path)
    try:
        raw = read_repository_file(path, path.parent, SETTINGS)
    except UnsafeFile as exc:
        if exc.reason == "missing":
            raise FileNotFoundError(str(exc)) from None
        raise ValueError(str(exc)) from None
    data = loads_json(raw, path.name)
    if not isinstance(data, dict) or data.get("format") != version:
        found = data.get("format") if isinstance(data, dict) else None
        raise ValueError(f"unsupported format {found!r}")
    return data


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists (one we may not signal counts: it exists)."""
    if pid <= 0:
        return False  # 0 and negatives name process groups to os.kill, not a process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prepare_out_dir(out_dir: Path) -> Path:
    """``--out`` as an existing folder (created with its parents when missing), or a one-line UserError."""
    out_dir = Path(out_dir)
    refuse_system_folder(out_dir, "--out")
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: exists and is not a folder; choose a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out {out_dir}: cannot create the folder ({exc.strerror or exc})") from None
    return out_dir


@contextlib.contextmanager
def staging_folder(parent: Path, prefix: str) -> Iterator[Path]:
    """A fresh hidden folder inside ``parent`` (moves out of it are renames); removed afterwards, always."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def move_into_place(staging: Path, out_dir: Path, *, last: Iterable[str] = ()) -> None:
    """Rename every entry of ``staging`` into ``out_dir`` (name order; the names in ``last`` go last).

    A file is replaced atomically. A folder cannot be: the old one is parked inside ``staging`` (removed
    with it) and the new one renamed in.
    """
    last = set(last)
    for entry in sorted(staging.iterdir(), key=lambda p: (p.name in last, p.name)):
        target = out_dir / entry.name
        if entry.is_dir():
            if target.exists() or target.is_symlink():
                os.replace(target, staging / f".old-{entry.name}")
        elif target.is_dir() and not target.is_symlink():
            os.replace(target, staging / f".old-{entry.name}")
        os.replace(entry, target)
