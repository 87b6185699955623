"""Reading tritonserver's log: its size, a slice of it, the lines that explain a failure.

The log is the only place the real reason for many refusals is written: a client often hears only
"failed to poll from model repository".
"""

from __future__ import annotations

import re
from pathlib import Path

LOG_TAIL_LINES = 4
# A model may print without end (800 MB at load): what is read back is its head and its tail, so memory
# stays flat. Load errors are logged last, startup tables first.
LOG_READ_HEAD = 1 << 20
LOG_READ_TAIL = 3 << 20
# What the server logs on every CPU-only machine; never the reason something failed.
_HARMLESS = ("nvml", "dcgm", "cuda", "gpu metrics", "pinned memory")
_LOG_LINE = re.compile(r'^(?P<level>[IEW])\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\]\s+"?(?P<message>.*?)"?$')


def log_size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def log_text(path: Path | None, start: int = 0) -> str:
    """The log from byte ``start`` on (take ``log_size()`` before an action to read what it logged), at
    most its first ``LOG_READ_HEAD`` and last ``LOG_READ_TAIL`` bytes, with a line saying what was skipped."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, 2)
            if end - start <= LOG_READ_HEAD + LOG_READ_TAIL:
                f.seek(start)
                return f.read().decode("utf-8", errors="replace")
            f.seek(start)
            head = f.read(LOG_READ_HEAD)
            f.seek(end - LOG_READ_TAIL)
            tail = f.read(LOG_READ_TAIL)
    except OSError:
        return ""
    skipped = end - start - len(head) - len(tail)
    return (
        head.decode("utf-8", errors="replace")
        + f"\n[... {skipped:,} bytes of the server log skipped ...]\n"
        + tail.decode("utf-8", errors="replace")
    )


def log_tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last meaningful log lines joined on one line (error lines preferred)."""
    # Skip the option/model tables the server prints (rows start with '|' or '+').
    rows = [" ".join(r.split()) for r in text.splitlines() if r.strip() and r.strip()[0] not in "+|"]
    rows = [r for r in rows if not any(h in r.lower() for h in _HARMLESS)]
    errors = [r for r in rows if r[:1] == "E" or "error" in r.lower()]
    picked = (errors or rows)[-lines:]
    return " | ".join(picked)


def log_messages(text: str, levels: str = "EW") -> list[str]:
    """The messages of a tritonserver log excerpt's lines of the given levels (I, W, E)."""
    out = []
    for line in text.splitlines():
        match = _LOG_LINE.match(line.strip())
        if match and match.group("level") in levels:
            out.append(match.group("message").replace('\\"', '"'))
    return out


def explain_refusal(message: str | None, text: str, name: str) -> str:
    """The server's reason: its load error, or, when that only says 'failed to poll', the log's."""
    message = (message or "").strip()
    if not message or "failed to poll from model repository" in message:
        for entry in log_messages(text):
            prefix = f"Poll failed for model directory '{name}': "
            if entry.startswith(prefix):
                return entry[len(prefix) :]
        for entry in log_messages(text):
            if f"'{name}'" in entry and "ignore version directory" not in entry:
                return entry
    message = message.removeprefix(f"load failed for model '{name}': ").rstrip("; ")
    return message or f"failed to load '{name}' (no reason in the log)"
