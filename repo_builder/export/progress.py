"""Rich progress for the slow steps of an export (loading weights, tracing, parity), on stderr."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class Steps:
    """``with steps.step("exporting"):`` shows a spinner while it runs and a tick with the time after."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._console = None
        if enabled:
            from rich.console import Console

            self._console = Console(stderr=True)

    @contextlib.contextmanager
    def step(self, description: str) -> Iterator[None]:
        if self._console is None:
            yield
            return
        start = time.perf_counter()
        with self._console.status(description):
            yield
        self._console.print(f"[green]✓[/green] {description} ({time.perf_counter() - start:.1f} s)")
