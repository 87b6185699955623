"""Reading repository files safely: only regular files inside the repository, never more than a bound.

Offline validate must be safe on an untrusted pull request (docs/security.md): a symlink that leaves the
repository is never followed (and nothing of its target is printed), a FIFO is never opened for a
blocking read, a device never read to its (missing) end.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath


class UnsafeFile(Exception):
    """A file validate refuses to read; the message names the file, never anything of a link's target."""


def resolves_inside(path: Path, root: Path) -> bool:
    """Whether ``path`` (following every symlink) stays inside ``root``; False when it cannot be resolved."""
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte in a config string
        return False


def read_bounded(path: Path, root: Path, limit: int, what: str | None = None) -> bytes:
    """The bytes of ``path``, which must be a regular file inside ``root`` of at most ``limit`` bytes.

    Raises ``UnsafeFile`` otherwise. The file is opened non-blocking and checked with ``fstat`` on the
    open descriptor, so a FIFO swapped in after a check cannot block the read.
    """
    label = what or path.name
    if not resolves_inside(path, root):
        raise UnsafeFile(f"{label} is a symlink that leaves the repository (or is broken); not read")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UnsafeFile(f"cannot read {label}: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UnsafeFile(f"{label} is a folder, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{label} is not a regular file (a pipe or a device?); not read")
        if st.st_size > limit:
            raise UnsafeFile(f"{label} is {st.st_size} bytes, over the {limit}-byte limit; not read")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while being read
        raise UnsafeFile(f"{label} is over the {limit}-byte limit; not read")
    return data


def regular_file_size(path: Path, root: Path) -> int | None:
    """Size of a regular file inside ``root``, else None (missing, escaping, a folder, a FIFO ...)."""
    if not resolves_inside(path, root):
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def relative_inside(relative: str) -> bool:
    """A relative path (from a config string) that never climbs above its starting folder."""
    path = PurePosixPath(relative)
    if path.is_absolute():
        return False
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return True
