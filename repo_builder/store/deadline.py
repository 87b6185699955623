"""Time limits on object store traffic: a connect and a read timeout per request (botocore's) and one
deadline for a whole command (``--timeout``), so retries, backoff and calls that hang add up to at most
what the user asked for.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from repo_builder.errors import ToolError

T = TypeVar("T")
DEFAULT_STORE_TIMEOUT = 900.0  # seconds for one command's store traffic (publish of a few GB fits)
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 60.0
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("store_deadline", default=None)
_TIMEOUT: contextvars.ContextVar[float] = contextvars.ContextVar("store_timeout", default=DEFAULT_STORE_TIMEOUT)


@contextlib.contextmanager
def store_deadline(seconds: float) -> Iterator[None]:
    """Every store opened inside gives up ``seconds`` after entering (one command's ``--timeout``)."""
    deadline = _DEADLINE.set(time.monotonic() + seconds)
    timeout = _TIMEOUT.set(seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(deadline)
        _TIMEOUT.reset(timeout)


@dataclass(frozen=True)
class Deadline:
    """When a store's calls must have finished (``time.monotonic()``), and the ``--timeout`` it came from."""

    at: float
    seconds: float
    endpoint: str  # for the message: the store's endpoint, credentials redacted

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def expired(self, what: str) -> ToolError:
        return ToolError(
            f"{what}: the store at {self.endpoint} did not finish within {self.seconds:g} s (--timeout); check "
            "that the endpoint is the store's and answers, or raise --timeout"
        )


def current_deadline(endpoint: str) -> Deadline:
    """The deadline of the command running now (``store_deadline``), else the default from now."""
    seconds = _TIMEOUT.get()
    at = _DEADLINE.get()
    return Deadline(time.monotonic() + seconds if at is None else at, seconds, endpoint)


def request_timeouts() -> tuple[float, float]:
    """botocore's connect and read timeouts for the command running now: at most a third of its
    ``--timeout`` each, so a store that accepts and never answers is tried again before the deadline."""
    seconds = _TIMEOUT.get()
    return min(CONNECT_TIMEOUT, seconds / 3), min(READ_TIMEOUT, seconds / 3)


def call_before(action: Callable[[], T], deadline: Deadline, what: str) -> T:
    """Run ``action``, giving up at the deadline even when the call hangs (a server that accepts and never
    answers): it runs in a daemon thread, left to its own read timeout, so the process can exit."""
    remaining = deadline.remaining()
    if remaining <= 0:
        raise deadline.expired(what)
    values: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            values.append(action())
        except BaseException as exc:  # handed to the caller's thread as is
            errors.append(exc)

    worker = threading.Thread(target=run, name="repo-builder-store-call", daemon=True)
    worker.start()
    worker.join(remaining)
    if worker.is_alive():
        raise deadline.expired(what)
    if errors:
        raise errors[0]
    return values[0]


