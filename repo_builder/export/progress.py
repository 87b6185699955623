"""The one progress helper for work a user waits on (export, parity, each build phase), on stderr.

On a terminal: a rich spinner while a phase runs and a tick with its time after. Elsewhere (CI logs,
pipes): plain lines, one when a phase starts and one when it ends, so a log shows what took the time.
("Phases" are what a command goes through while a user waits; "steps" are the models of a pipeline; a "stage"
is the folder a build writes before moving it in: docs/architecture.md, Words.)
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any


def _plain(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Phases:
    """``with phases.phase("exporting"):`` shows the phase while it runs and its time after.

    ``enabled=False`` (``-q``) prints nothing; ``tty=None`` asks whether stderr is a terminal.
    ``write`` replaces the plain-line writer (``build`` passes its own logger).
    """

    def __init__(self, enabled: bool, *, tty: bool | None = None, write: Callable[[str], None] | None = None) -> None:
        self.enabled = enabled
        self._write = write or _plain
        self._console: Any = None
        if enabled and (sys.stderr.isatty() if tty is None else tty):
            from rich.console import Console  # light, but only needed on a terminal

            self._console = Console(stderr=True)

    def note(self, message: str) -> None:
        """A line of its own (not a timed phase)."""
        if not self.enabled:
            return
        if self._console is not None:
            self._console.print(message, markup=False, highlight=False)
        else:
            self._write(message)

    @contextlib.contextmanager
    def phase(self, description: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        if self._console is not None:
            with self._console.status(description):
                yield
            self._console.print(f"[green]✓[/green] {_escape(description)} ({time.perf_counter() - start:.1f} s)", highlight=False)
            return
        self._write(f"{description} ...")
        yield
        self._write(f"done: {description} ({time.perf_counter() - start:.1f} s)")


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
