"""Lists in messages and hints, bounded: a graph with a million inputs must not make a 3 MB hint.

The first few names are shown, then how many were left out ("a, b, c ... and 999,990 more"), so a report's
size grows with its findings, never with the size of what a finding talks about.
"""

from __future__ import annotations

from collections.abc import Iterable

SHOWN = 10  # names shown before "... and N more"


def name_list(names: Iterable[str], shown: int = SHOWN, empty: str = "(none)") -> str:
    """``names`` joined by ", ", at most ``shown`` of them, the rest counted."""
    head: list[str] = []
    rest = 0
    for name in names:
        if len(head) < shown:
            head.append(name)
        else:
            rest += 1
    if not head:
        return empty
    return ", ".join(head) + (f" ... and {rest:,} more" if rest else "")


HINT_CHARS = 1000  # a hint is advice: a few lines at most, whatever it quotes


def bounded_text(text: str | None, limit: int = HINT_CHARS) -> str | None:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]} ... ({len(text) - limit:,} more characters)"
