"""The one reader for files that come from a model repository (issue 28): regular files inside it, bounded.

Every command that reads a file from a repository (validate's configs, ``model.py``, ``plan.json``, the
manifest, labels, ONNX graphs; build's tokenizer, labels and family configs; compile's recipes) goes
through ``read_repository_file`` (bytes) or ``open_repository_file`` (a descriptor, for mmap, hashing or a
header). ``tests/core/test_guarded_reads.py`` fails when a module opens a file another way and is not
listed there as an exception (files the user names on the command line, files a command writes).

What it guarantees, whatever the repository holds:

- **Nothing outside is opened.** A path written below the root (``root/a/b``, no ``..``) is opened
  component by component from the root with ``O_NOFOLLOW``: no component can be a link, so the file lies
  inside (no ``realpath`` needed: the common case, and most of validate's reads). Any other path, or a
  walk that meets a link, is resolved (``realpath``: only ``lstat``/``readlink``, no open) and must lie
  inside the resolved root; then it is opened the same way from the resolved root, so a link swapped in
  after the check fails the open (``ELOOP``) instead of being followed. A link that stays inside the
  repository is read, as Triton would read it.
- **Only regular files are opened.** Each component is ``lstat``-ed before its ``open`` (a FIFO, socket
  or device is never opened) and the file is ``fstat``-ed once open (``O_NONBLOCK``: a FIFO swapped in
  cannot block).
- **Bounded.** Each kind of file has a size limit (``FileKind.limit``, table below); a larger file is
  refused before a byte is read, and a file that grows while read is read only up to the limit.
- **The refusal is a sentence** (``UnsafeFile``) that names the file as given (never a link's target) and
  says what to do; callers turn it into their rule's finding.

Limits (``KINDS``): ``config.pbtxt`` 64 MiB, ``model.py`` 16 MiB, ``repo-builder.json`` 16 MiB,
``plan.json`` 16 MiB, labels 16 MiB, tokenizer files 64 MiB, small JSON settings (family configs,
``compile.json``, ``signature.json``) 16 MiB, ONNX graphs 2 GiB (memory-mapped, never read whole),
hashed files 8 GiB (streamed), TensorRT plans 4 GiB (deserialized on GPU machines only), plan headers (the first 28 bytes of any size).

JSON from a repository is parsed with ``loads_json`` (depth limit ``MAX_JSON_DEPTH``): a file nested
100,000 deep is a refusal, never a ``RecursionError``.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MiB = 1 << 20
MAX_JSON_DEPTH = 64  # repo-builder's own JSON files nest 6 deep; tokenizer.json about 8


@dataclass(frozen=True)
class FileKind:
    """A kind of repository file and how much of it may be read."""

    name: str  # what the messages call it
    limit: int  # bytes; a bigger file is refused (for ``prefix`` kinds: the bytes read, any size allowed)
    prefix: bool = False  # read only the first ``limit`` bytes (plan headers)


CONFIG = FileKind("config.pbtxt", 64 * MiB)  # Triton has no limit; 64 MiB keeps 9 MB label configs
PYTHON = FileKind("model.py", 16 * MiB)
MANIFEST = FileKind("repo-builder.json", 16 * MiB)
SIDECAR = FileKind("plan.json", 16 * MiB)
LABELS = FileKind("labels file", 16 * MiB)
TOKENIZER = FileKind("tokenizer file", 64 * MiB)  # tokenizer.json of large vocabularies reach ~20 MB
SETTINGS = FileKind("JSON settings file", 16 * MiB)
ONNX = FileKind("ONNX file", 2048 * MiB)  # protobuf's own 2 GiB limit; mapped, not read
HASHED = FileKind("file", 8192 * MiB)  # streamed through sha256 in 1 MiB chunks
PLAN = FileKind("TensorRT plan", 4096 * MiB)  # deserialized whole, on GPU machines only
PLAN_HEADER = FileKind("plan file", 28, prefix=True)
KINDS = (CONFIG, PYTHON, MANIFEST, SIDECAR, LABELS, TOKENIZER, SETTINGS, ONNX, HASHED, PLAN, PLAN_HEADER)

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_ROOT_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC  # the root as the user gave it, links and all


class UnsafeFile(Exception):
    """A repository file that is not read; the message names it (never a link's target) and what to do."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason  # "outside" | "broken" | "folder" | "special" | "too-big" | "missing" | "unreadable"


def _inside(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` (both resolved) when it lies inside, else None."""
    if path == root:
        return ""
    prefix = root.rstrip(os.sep) + os.sep
    return path[len(prefix):] if path.startswith(prefix) else None


def written_below(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` when it is written below it with plain components (no ``.``, ``..``
    or empty part), else None. Lexical: no system call."""
    text, base = os.fspath(path), os.fspath(root)
    prefix = base if base.endswith(os.sep) else base + os.sep
    if not text.startswith(prefix):
        return None
    relative = text[len(prefix):]
    return None if any(part in ("", ".", "..") for part in relative.split(os.sep)) else relative


def _resolve(path: Path, root: Path, label: str) -> tuple[str, str, bool]:
    """(base folder, path relative to it, whether the base is resolved) or UnsafeFile; opens nothing.

    A path written below the root needs no resolving: the walk from the root refuses every link, and on
    meeting one (or anything unusual) ``open_repository_file`` resolves for real (``_resolve_real``)."""
    relative = written_below(path, root)
    if relative is not None:
        return os.fspath(root), relative, False
    return (*_resolve_real(path, root, label), True)


def _resolve_real(path: Path, root: Path, label: str) -> tuple[str, str]:
    """(resolved root, resolved path relative to it) or UnsafeFile; opens nothing."""
    try:
        real_root = os.path.realpath(root, strict=True)
        real = os.path.realpath(path, strict=True)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UnsafeFile(f"{label} is a dangling symlink; not read (point it at a file inside the repository)", "broken") from None
        raise UnsafeFile(f"{label} does not exist", "missing") from None
    except (OSError, ValueError, RuntimeError):  # a symlink loop, a NUL byte from a config string
        raise UnsafeFile(f"{label} is a symlink loop or an unusable path; not read (replace it with a regular file)", "broken") from None
    relative = _inside(real, real_root)
    if relative is None:
        raise UnsafeFile(
            f"{label} is a symlink that leaves the repository (or lies in a linked folder that does); not read "
            "(copy the file into the repository)",
            "outside",
        )
    return real_root, relative


class _NotPlain(Exception):
    """The unresolved walk met a link or an error: resolve the path for real and walk again."""


def _refuse_kind(mode: int, label: str) -> None:
    if stat.S_ISDIR(mode):
        raise UnsafeFile(f"{label} is a folder, not a file; not read", "folder")
    if not stat.S_ISREG(mode):
        raise UnsafeFile(f"{label} is not a regular file (a FIFO, socket or device); not read (replace it with a file)", "special")


def _open_beneath(base: str, relative: str, label: str, resolved: bool = True) -> int:
    """Open ``relative`` under ``base`` one component at a time, never following a link.

    ``resolved=False``: ``base`` is the root as given (its own links are the user's and followed) and any
    link or error below it raises ``_NotPlain`` instead of a refusal."""
    parts = [p for p in relative.split(os.sep) if p]
    if not parts:
        raise UnsafeFile(f"{label} is a folder, not a file; not read", "folder")
    try:
        fd = os.open(base, _DIR_FLAGS if resolved else _ROOT_FLAGS)
    except (OSError, ValueError):
        if resolved:
            raise
        raise _NotPlain from None
    try:
        for part in parts[:-1]:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        mode = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode  # before any open
        if stat.S_ISLNK(mode):  # resolved: realpath resolved every link, so this one was swapped in since
            if not resolved:
                raise _NotPlain
            raise UnsafeFile(f"{label} changed into a symlink while being read; not read", "outside")
        _refuse_kind(mode, label)
        return os.open(parts[-1], _FLAGS, dir_fd=fd)
    except (OSError, ValueError):
        if resolved:
            raise
        raise _NotPlain from None
    finally:
        os.close(fd)


def _open_checked(path: Path, root: Path, kind: FileKind, label: str) -> tuple[int, int]:
    """``(fd, size)`` of a regular file inside ``root`` within ``kind``'s limit, else UnsafeFile; the
    caller closes the descriptor."""
    base, relative, resolved = _resolve(path, root, label)
    try:
        try:
            fd = _open_beneath(base, relative, label, resolved)
        except _NotPlain:  # a link or an error on the plain walk: resolve, then walk from the resolved root
            fd = _open_beneath(*_resolve_real(path, root, label), label)
    except UnsafeFile:
        raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a component became a link after the check
            raise UnsafeFile(f"{label} changed into a symlink while being read; not read", "outside") from None
        if exc.errno == errno.ENXIO:  # a socket
            raise UnsafeFile(f"{label} is not a regular file (a socket); not read", "special") from None
        raise UnsafeFile(f"cannot read {label}: {exc.strerror or exc}", "unreadable") from None
    try:
        st = _checked_stat(fd, label, kind)
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def _checked_stat(fd: int, label: str, kind: FileKind) -> os.stat_result:
    """The opened file's stat, refused unless it is a regular file within ``kind``'s limit (a prefix kind reads any size)."""
    st = os.fstat(fd)
    _refuse_kind(st.st_mode, label)
    if not kind.prefix and st.st_size > kind.limit:
        raise UnsafeFile(f"{label} is {st.st_size:,} bytes, over the {kind.limit:,}-byte limit for a {kind.name}; not read", "too-big")
    return st


@contextmanager
def open_repository_file(path: Path, root: Path, kind: FileKind, what: str | None = None) -> Iterator[tuple[int, int]]:
    """``(fd, size)`` of ``path``, a regular file inside ``root`` within ``kind``'s limit; else UnsafeFile.

    The descriptor is closed on exit. For mmap (ONNX), streaming (hashes) and headers; whole files go
    through ``read_repository_file``.
    """
    fd, size = _open_checked(path, root, kind, what or path.name)
    try:
        yield fd, size
    finally:
        os.close(fd)


def read_repository_file(path: Path, root: Path, kind: FileKind, what: str | None = None) -> bytes:
    """The bytes of ``path``: a regular file inside ``root``, at most ``kind.limit`` bytes (see the module
    docstring for the limits); raises ``UnsafeFile`` (a one-line reason naming the file) otherwise.

    ``root`` is the folder the file must stay in (the repository root, or the model folder for files a
    model may not share). A ``prefix`` kind returns only the first ``kind.limit`` bytes of any file.
    """
    label = what or path.name
    fd, size = _open_checked(path, root, kind, label)  # no context manager: one per file read adds up in validate
    try:
        chunks: list[bytes] = []
        left = kind.limit + (0 if kind.prefix else 1)
        # os.read allocates the whole request up front: ask for about the size fstat gave (one byte more to see
        # the end, at least 64 KiB for a file that reports 0 or grows), not 4 MiB, so a small file costs no
        # large allocation (a config or model.py: one read and the one that sees the end).
        step = min(4 * MiB, max(size + 1, 64 * 1024))
        while left > 0:
            try:
                chunk = os.read(fd, min(left, step))
            except OSError as exc:
                raise UnsafeFile(f"cannot read {label}: {exc.strerror or exc}", "unreadable") from None
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if not kind.prefix and len(data) > kind.limit:  # grew while being read
        raise UnsafeFile(f"{label} is over the {kind.limit:,}-byte limit for a {kind.name}; not read", "too-big")
    return data


def _open_at(name: str, flags: int, dir_fd: int | None) -> int:
    return os.open(name, flags, dir_fd=dir_fd)


def open_root(root: Path) -> int:
    """A descriptor of the repository root as given (its own links are the user's and followed), for
    ``open_folder_at``; ``OSError`` when it cannot be opened. The caller closes it."""
    return _open_at(os.fspath(root), _ROOT_FLAGS, None)


def open_folder_at(parent_fd: int, name: str) -> int:
    """A descriptor of the folder ``name`` inside the folder open as ``parent_fd``, opened without following
    a link (``O_NOFOLLOW``: a link there, or one swapped in, fails with ``ELOOP``); ``OSError`` otherwise.
    The caller closes it. A scan opens each model folder once this way and reads its files relative to it
    (``read_entry_at``) instead of walking each file's path from the root again."""
    return _open_at(name, _DIR_FLAGS, parent_fd)


def read_entry_at(dir_fd: int, entry: os.DirEntry[str], kind: FileKind) -> bytes:
    """The bytes of ``entry``, listed by ``os.scandir(dir_fd)`` of a folder opened without following links
    (``open_folder_at``): ``read_repository_file``'s guarantees with one open instead of a walk (see
    ``read_entry_stat_at``)."""
    return read_entry_stat_at(dir_fd, entry, kind)[0]


def read_entry_stat_at(dir_fd: int, entry: os.DirEntry[str], kind: FileKind) -> tuple[bytes, os.stat_result]:
    """``read_entry_at``'s bytes and the ``fstat`` of the file they were read from (its size and mtime:
    a scan needs no second ``stat`` of a file it read).

    The listing's type stands for the ``lstat`` before the open (it is the same check: only a regular file
    that is no link is opened; ``DirEntry`` asks the kernel itself where the file system gives no type),
    the open refuses a link swapped in since (``O_NOFOLLOW``), ``fstat`` then checks the opened file is
    regular and within ``kind``'s limit. ``UnsafeFile`` for anything else (callers wanting the path-based
    reader's exact words for a link or a special file call it for those)."""
    label = entry.name
    try:
        regular = entry.is_file(follow_symlinks=False)
    except OSError as exc:
        raise UnsafeFile(f"cannot read {label}: {exc.strerror or exc}", "unreadable") from None
    if not regular:
        raise UnsafeFile(f"{label} is not a regular file that is no symlink; not read", "special")
    try:
        fd = _open_at(entry.name, _FLAGS, dir_fd)
    except OSError as exc:
        raise UnsafeFile(f"cannot read {label}: {exc.strerror or exc}", "unreadable") from None
    try:
        st = _checked_stat(fd, label, kind)
        # A short read of a regular file is its end: one read of the size fstat gave plus one byte (to see a
        # file that grew), bounded by the limit; only a file that filled it is read on.
        want = min(st.st_size + 1, kind.limit + (0 if kind.prefix else 1))
        data = os.read(fd, want)
        while len(data) == want and len(data) <= kind.limit and not kind.prefix:
            more = os.read(fd, min(4 * MiB, kind.limit + 1 - len(data)))
            if not more:
                break
            data += more
            want = len(data)
    except OSError as exc:
        raise UnsafeFile(f"cannot read {label}: {exc.strerror or exc}", "unreadable") from None
    finally:
        os.close(fd)
    if kind.prefix:
        return data[: kind.limit], st
    if len(data) > kind.limit:  # grew while being read
        raise UnsafeFile(f"{label} is over the {kind.limit:,}-byte limit for a {kind.name}; not read", "too-big")
    return data, st


def json_depth(value: Any) -> int:
    """Nesting depth of parsed JSON (iterative: no recursion on hostile input)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def loads_json(data: bytes | str, what: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """JSON from a repository file, nested at most ``max_depth`` deep; ``ValueError`` (one line naming
    ``what``) for anything else, including input nested deep enough to exhaust the parser's stack."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError(f"{what} nests JSON deeper than {max_depth} levels; not read") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from None
    if json_depth(value) > max_depth:
        raise ValueError(f"{what} nests JSON deeper than {max_depth} levels; not read")
    return value
