"""An exclusive lock on a repository folder, held for a whole build.

The lock is ``flock`` on ``.<out-name>.repo-builder.lock`` BESIDE ``--out`` (never inside it: every
folder in a repository is a model to Triton, and a file there would be published with it). The kernel
drops the lock when the holder dies, even by SIGKILL, so a stale lock file never blocks anyone; the file
holds the holder's PID only so that the second build can say who holds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from repo_builder.errors import ToolError, UserError

LOCK_SUFFIX = ".repo-builder.lock"


def lock_path(out: Path) -> Path:
    return out.parent / f".{out.name}{LOCK_SUFFIX}"


def _holder(path: Path) -> str:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        text = ""
    return f"PID {text}" if text.isdigit() else "another process"


def _open_locked(path: Path) -> int | None:
    """The locked fd of ``path``, or None when another process holds it.

    The file may be unlinked by the releasing holder between our open and our flock: then we hold a lock
    on a file nobody else will open, so we check the path still names our inode and retry otherwise.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


@contextlib.contextmanager
def repository_lock(out: Path) -> Iterator[Path]:
    """Hold the lock of ``out`` (its parent must exist); a second holder fails at once, naming the first."""
    path = lock_path(out)
    try:
        fd = _open_locked(path)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot create the lock file {path} ({exc.strerror}); make {out.parent} writable") from None
    if fd is None:
        # Exit 3 (environment), not 2: the command was right, the folder is busy.
        raise ToolError(f"--out {out}: another build is writing it ({_holder(path)} holds {path}); wait for it to finish, or choose another --out")
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        yield path
    finally:
        # Unlink before unlocking: a waiter that opened the old file sees the inode changed and retries.
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)
