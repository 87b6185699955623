"""Failures of the machine, not of repo-builder: a full disk, a file size limit, a closed pipe, a path the
kernel refuses, an output that cannot encode the report, a permission. ``cli/main.py`` turns them into one
sentence and exit 3 (``ToolError``); exit 4 stays reserved for bugs.
"""

from __future__ import annotations

import errno
import os
import sys
import types

from repo_builder.redact import redact

# errno -> what the user should read (the kernel's own wording is terse and sometimes misleading)
_SENTENCES: dict[int, str] = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EFBIG: "the file is larger than the file size limit allows (ulimit -f)",
    errno.EPIPE: "the output was closed before everything was written (broken pipe)",
    errno.ENAMETOOLONG: "a path is longer than the system allows",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "the file system is read-only",
    errno.EIO: "an input/output error from the device",
    errno.EMFILE: "too many open files (ulimit -n)",
    errno.ENFILE: "too many open files on the system",
    errno.ENOMEM: "out of memory",
}
_ADVICE: dict[int, str] = {
    errno.ENOSPC: "free some space or write elsewhere",
    errno.EDQUOT: "free some space or write elsewhere",
    errno.EFBIG: "raise the limit (ulimit -f unlimited) or write smaller files",
    errno.EPIPE: "keep the reading end open until the command exits",
    errno.ENAMETOOLONG: "use a shorter path",
    errno.EACCES: "check the permissions or choose another path",
    errno.EPERM: "check the permissions or choose another path",
    errno.EROFS: "write to a writable location",
}


def environment_failure(exc: BaseException) -> str | None:
    """One sentence when ``exc`` is the environment's failure, else None (then it is a bug)."""
    if isinstance(exc, UnicodeEncodeError) and _raised_by_output(exc):
        encoding = exc.encoding or "the output's"
        return (
            f"cannot print the output: its encoding ({encoding}) cannot represent "
            f"{exc.object[exc.start:exc.end]!r}; set PYTHONIOENCODING=utf-8 or use a UTF-8 locale"
        )
    if not isinstance(exc, OSError) or exc.errno not in _SENTENCES:
        return None
    what = _SENTENCES[exc.errno]
    if exc.filename is not None:
        where = redact(_shorten(str(exc.filename)))
    else:  # a write to an open file: only a closed pipe is surely the output
        where = "standard output" if exc.errno == errno.EPIPE else "writing a file"
    advice = _ADVICE.get(exc.errno)
    return f"{where}: {what}" + (f"; {advice}" if advice else "")


def _shorten(path: str, keep: int = 160) -> str:
    """A path over 4 KiB named in a one-line message: its start and end are enough."""
    return path if len(path) <= keep else f"{path[:keep // 2]}…{path[-keep // 2:]}"


def _raised_by_output(exc: BaseException) -> bool:
    """Whether an encoding error came from writing to a text stream (the report, a message), not from
    repo-builder encoding some value by mistake."""
    tb: types.TracebackType | None = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in ("echo", "write", "secho") and "click" in code.co_filename:
            return True
        tb = tb.tb_next
    return False


def silence_stdout() -> None:
    """After stdout failed (full device, closed pipe): point it at /dev/null so the interpreter's final
    flush of what is still buffered cannot fail again with a second message."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a real file (a test's capture): nothing will flush it at exit
