"""Reading repository files safely: only regular files inside the repository, never more than a bound.

Offline validate must be safe on an untrusted pull request (docs/security.md): a symlink that leaves the
repository is never followed (and nothing of its target is printed), a FIFO is never opened for a
blocking read, a device never read to its (missing) end.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

from repo_builder.guarded_read import FileKind, UnsafeFile, read_repository_file, written_below

__all__ = ["UnsafeFile", "read_bounded", "regular_file_size", "relative_inside", "resolves_inside"]


def resolves_inside(path: Path, root: Path) -> bool:
    """Whether ``path`` (following every symlink) stays inside ``root``; False when it cannot be resolved."""
    relative = written_below(path, root)
    if relative is not None and _no_link_below(os.fspath(root), relative):
        return True  # realpath(path) is realpath(root) joined with the same plain parts
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte in a config string
        return False


def _no_link_below(base: str, relative: str) -> bool:
    """Whether no component of ``relative`` under ``base`` is a symlink (``lstat`` each, as ``realpath``
    would). A missing component ends the walk as a non-strict ``resolve`` does: the rest is plain text."""
    current = base
    for part in relative.split(os.sep):
        current = os.path.join(current, part)
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return False
        except OSError as exc:  # missing, or beneath a file: non-strict resolve appends the rest unchanged
            return exc.errno in (errno.ENOENT, errno.ENOTDIR)  # anything else (a loop above): resolve decides
        except ValueError:  # a NUL byte: resolve decides (it refuses)
            return False
    return True


def read_bounded(path: Path, root: Path, limit: int, what: str | None = None) -> bytes:
    """The bytes of ``path``, a regular file inside ``root`` of at most ``limit`` bytes, through the one
    guarded reader (``repo_builder.guarded_read``); raises ``UnsafeFile`` otherwise."""
    label = what or path.name
    return read_repository_file(path, root, FileKind(label, limit), label)


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
