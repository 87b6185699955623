"""SIGTERM handled like Ctrl-C (SIGINT), so the same cleanup runs for both.

CI cancels jobs with SIGTERM, whose default action ends Python at once: no ``finally``, so a server's
process group, its Python stubs, a build's stage and lock, temporary folders would be left behind.
``cli/main.py`` wraps every command in ``interrupt_on_termination()``; long operations wrap themselves
too (for library callers). The first signal raises ``KeyboardInterrupt``; later ones are ignored so
that the cleanup it started is not cut short. Nested uses share that one handler and its state.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn

HANDLED = (signal.SIGINT, signal.SIGTERM)
_fired = False  # a signal already raised KeyboardInterrupt: the cleanup it started is running


def _interrupt(signum: int, frame: FrameType | None) -> None:
    global _fired
    if _fired:
        return  # already stopping: let the cleanup finish
    _fired = True
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _in_main_thread() -> bool:
    # Signal handlers can only be set from the main thread; the main thread's own handlers apply there.
    return threading.current_thread() is threading.main_thread()


@contextmanager
def interrupt_on_termination() -> Iterator[None]:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt`` (the first one); a no-op outside the main thread
    or inside another ``interrupt_on_termination()`` (its handler, and whether it fired, hold)."""
    global _fired
    if not _in_main_thread() or signal.getsignal(signal.SIGTERM) is _interrupt:
        yield
        return
    _fired = False
    previous = {s: signal.signal(s, _interrupt) for s in HANDLED}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends: a cleanup is never cut short half-way.

    A signal that arrives meanwhile is raised again right after the block, to the handler in place
    before it (Python runs signal handlers in the main thread, so this holds whichever thread got it).
    """
    if not _in_main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    previous = {s: signal.signal(s, hold) for s in HANDLED}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
        if pending:
            signal.raise_signal(pending[0])


def exit_with(main: Callable[[], int]) -> NoReturn:
    """Run ``main`` as the whole process (the console script, ``python -m``) and exit with its code.

    The handlers stay in place from before ``main`` to the exit, so a signal that lands as ``main``
    returns (after its own handling) exits 130, never Python's KeyboardInterrupt traceback or a death
    by SIGINT; once the code is known, later signals are ignored: the command is over.
    """
    global _fired
    _fired = False
    for s in HANDLED:
        signal.signal(s, _interrupt)
    try:
        code = main()
        for s in HANDLED:
            signal.signal(s, signal.SIG_IGN)
    except KeyboardInterrupt:  # the first signal, raised past main's own handling; later ones are no-ops
        for s in HANDLED:
            signal.signal(s, signal.SIG_IGN)
        sys.stderr.write("interrupted\n")
        code = 130
    sys.exit(code)
