"""The one path-safety rule for every local write: a path built from outside input (an object store's key, a
report option, ``--out``, a pull target) is checked before anything is written through it.

- A *relative key* (an object store key below a prefix, a manifest or recipe entry) must be a plain relative
  path: no leading ``/``, no empty, ``.`` or ``..`` part, no NUL byte (a backslash is an ordinary character
  on Linux, as it is to Triton there). ``prefix//etc/passwd`` gives
  the key ``/etc/passwd``, which ``Path.joinpath`` would turn into the absolute path it names.
- The joined path must still lie inside its root once the root's own links are resolved.
- A *target folder* (``--out``, pull's DIR) may not be ``/`` or the home folder: a build or a pull replaces
  what it targets, and either would be replaced or filled.
- A *report file* is written atomically (beside it, renamed over it) when it is new or a regular file; the
  streams ``/dev/stdout``, ``/dev/stderr``, ``/dev/null`` and ``/dev/fd/N`` are written in place; anything
  else (a symlink, a FIFO, a device, a socket) is refused, so a report never replaces what it points at.
"""

from __future__ import annotations

import os
import re
import stat
from enum import Enum
from pathlib import Path, PurePosixPath

from repo_builder.errors import UserError

# What a shell or CI step means by "print it here": written in place, never replaced by a rename.
_STREAMS = re.compile(r"^/(dev/(stdout|stderr|null|fd/[0-9]+)|proc/self/fd/[0-9]+)$")


def key_problem(relative: str) -> str | None:
    """Why ``relative`` (a '/'-separated key below a root) is not a plain relative path, else None."""
    if not relative:
        return "an empty key"
    if relative.startswith("/"):
        return "an absolute path (the prefix is followed by '/')"
    if "\x00" in relative:
        return "a NUL byte"
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "an empty, '.' or '..' part in the key"
    return None


def inside(root: Path, relative: str) -> Path:
    """``root / relative`` when ``relative`` is a plain relative key that stays inside ``root``; else
    ``ValueError`` naming why (callers turn it into their own refusal or finding)."""
    problem = key_problem(relative)
    if problem is not None:
        raise ValueError(problem)
    target = root.joinpath(*PurePosixPath(relative).parts)
    base = os.path.realpath(root)
    # The parent is resolved (it may not exist yet: realpath resolves what exists); the leaf itself is
    # what the caller creates or replaces.
    parent = os.path.realpath(target.parent)
    if parent != base and not parent.startswith(base + os.sep):
        raise ValueError("a path that leaves its folder through a link")
    return target


def refuse_system_folder(folder: Path, option: str) -> None:
    """A ``UserError`` when ``folder`` is ``/`` or the home folder (after resolving links)."""
    resolved = Path(os.path.realpath(folder))
    try:
        home: Path | None = Path(os.path.realpath(Path.home()))
    except (KeyError, RuntimeError):
        home = None  # no home folder known: nothing to protect
    if resolved == Path(resolved.anchor):
        raise UserError(f"{option} {folder}: is the file system's root; choose a folder of its own (e.g. ./models)")
    if home is not None and resolved == home:
        raise UserError(f"{option} {folder}: is your home folder; choose a folder of its own (e.g. ~/models)")


class ReportWrite(Enum):
    ATOMIC = "atomic"  # new or a regular file: written beside it and renamed over it
    IN_PLACE = "in place"  # /dev/stdout and its kind: opened and written, never replaced


def report_write(path: Path, option: str) -> ReportWrite:
    """How the report file ``path`` is written, or a one-line ``UserError`` saying why it is refused."""
    if _STREAMS.match(os.path.abspath(path)):
        return ReportWrite.IN_PLACE
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ReportWrite.ATOMIC
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot inspect it ({exc.strerror or exc}); choose another path") from None
    if stat.S_ISREG(st.st_mode):
        return ReportWrite.ATOMIC
    kind = _kind(st.st_mode)
    raise UserError(
        f"{option} {path}: is {kind}; a report replaces its file, so it is written only to a regular file "
        "(or /dev/stdout, /dev/stderr, /dev/null): remove it or choose another path"
    )


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link (name the file it points to, if that is what you mean)"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def write_in_place(path: Path, text: str) -> None:
    """Write ``text`` to a stream-like target (``/dev/stdout`` ...) without creating or replacing it."""
    # O_APPEND: a /dev/stdout redirected to a file (``> log``) keeps what was written before.
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)
