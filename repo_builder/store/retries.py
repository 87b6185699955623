"""Retrying object store calls on transient failures, and turning the last failure into the package's
error roots: a missing bucket or object is the user's (exit 2), a network or store failure that outlived
the retries, or missing credentials, the environment's (exit 3).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from repo_builder.errors import ToolError, UserError
from repo_builder.redact import redact
from repo_builder.store.deadline import Deadline, call_before

T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """Worth another try: connection and timeout failures, throttling and 5xx answers, not 403/404."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    name = type(exc).__name__
    if any(s in name for s in ("EndpointConnection", "ConnectionClosed", "ReadTimeout", "ConnectTimeout", "ClientConnector")):
        return True
    text = str(exc)
    if any(s in text for s in ("SlowDown", "Throttl", "InternalError", "ServiceUnavailable", "RequestTimeout", "503", "500")):
        return True
    return isinstance(exc, OSError) and exc.errno is None and "Access Denied" not in text


def with_retries(action: Callable[[], T], what: str, attempts: int = 4, base_delay: float = 0.5,
                 sleep: Callable[[float], None] = time.sleep, deadline: Deadline | None = None) -> T:
    """Run ``action``; on a transient failure wait (exponential backoff with jitter) and try again.

    The last failure, or the first that is not transient, is raised as a one-line error naming ``what``.
    With a ``deadline``, each attempt is cut at it and no backoff outlasts it.
    """
    for attempt in range(1, attempts + 1):
        try:
            return action() if deadline is None else call_before(action, deadline, what)
        except Exception as exc:  # network stacks raise many types; is_transient sorts them
            if isinstance(exc, ToolError):
                raise  # the deadline passed: another attempt has no time left
            if attempt < attempts and is_transient(exc):
                delay = base_delay * (2 ** (attempt - 1)) * (1 + random.random() / 4)
                if deadline is not None and delay >= deadline.remaining():
                    raise deadline.expired(what) from None
                sleep(delay)
                continue
            raise store_error(exc, what, attempt) from None
    raise AssertionError("unreachable")


def store_error(exc: BaseException, what: str, attempts: int = 1) -> UserError | ToolError:
    """The error root for a failure: the user's (missing bucket/object) or the environment's."""
    detail = redact(str(exc).splitlines()[0]) if str(exc) else type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        return UserError(f"{what}: not found ({detail}); check the bucket and prefix")
    if "NoCredentials" in type(exc).__name__:
        return ToolError(f"{what}: no credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)")
    if isinstance(exc, PermissionError) or "AccessDenied" in detail or "Access Denied" in detail:
        return ToolError(f"{what}: access denied; check the credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE ...)")
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return ToolError(f"{what}: the object store failed{tries}: {type(exc).__name__}: {detail}")


