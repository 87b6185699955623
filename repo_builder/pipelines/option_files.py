"""Files given as build options, checked before anything is exported (what a path is when it is not a file)."""

from __future__ import annotations

import stat
from pathlib import Path

from repo_builder.errors import UserError


def describe_path(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file ("a folder", "a FIFO" ...), None when it is one."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((f"is {name}, not a file" for test, name in kinds if test(mode)), "is not a regular file")


def check_labels_file(path: Path | None, option: str = "--labels") -> None:
    """Fail before exporting when the labels file cannot be read (the class count is checked after export)."""
    if path is None:
        return
    problem = describe_path(path)
    if problem is not None:
        raise UserError(f"{option} {path}: {problem}; pass a text file with one label per line")
    try:
        path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{option} {path}: cannot read it as UTF-8 text ({exc})") from None
