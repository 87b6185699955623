"""The Triton 2.51 stub-hang workaround: a load that will never finish is cut short.

Triton 2.51 waits forever for a Python-backend stub that failed to start (a missing model.py): the
load request never answers and the server ignores SIGTERM. The stub's failure is logged at once, so when
the log shows it for the model being loaded and no answer follows within ``STUB_GRACE`` seconds, the
load is given up as timed out (the caller restarts the server: it is stuck on that load).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from repo_builder.triton.client import LoadOutcome, load_model
from repo_builder.triton.server_log import log_messages

# Seconds to wait for a load's answer after its Python-backend stub logged that it could not start.
STUB_GRACE = 3.0
_STUB_FAILED = "Failed to preinitialize Python stub"
_STUB_PATH = re.compile(r"'(?P<path>[^']+/[^/']+/[^/']+)'")
_LOADING = re.compile(r"loading: (?P<name>.+):\d+")
_SETTLED = re.compile(r"(?:successfully loaded|failed to load) '(?P<name>[^']+)'")


def stub_failed(log_text: str, name: str) -> bool:
    """The log says the stub of model ``name`` could not start (the load will then hang in 2.51)."""
    return any(_STUB_FAILED in line and f"/{name}/" in line for line in log_text.splitlines())


def failed_stubs(log_text: str) -> set[str]:
    """The models whose stub failure ``log_text`` shows (from the model file's path in the message)."""
    names = set()
    for line in log_text.splitlines():
        found = _STUB_PATH.search(line)
        if found and _STUB_FAILED in line:
            names.add(PurePath(found.group("path")).parent.parent.name)
    return names


def unsettled_models(log_text: str) -> set[str]:
    """Models the log shows loading with no 'successfully loaded' or 'failed to load' after."""
    loading: set[str] = set()
    for message in log_messages(log_text, "IEW"):
        started = _LOADING.fullmatch(message)
        if started:
            loading.add(started.group("name"))
        settled = _SETTLED.match(message)
        if settled:
            loading.discard(settled.group("name"))
    return loading


def _hung(name: str, timeout: float | None) -> LoadOutcome:
    return LoadOutcome(name, False, f"no answer within {timeout:g} s while loading '{name}'", True)


def watch_load(
    client: Any,
    name: str,
    timeout: float | None,
    read_log: Callable[[], str],
    alive: Callable[[], bool],
) -> LoadOutcome | None:
    """Load ``name`` in a thread and watch the log; ``None`` when the server died before answering."""
    done: list[LoadOutcome] = []
    worker = threading.Thread(target=lambda: done.append(load_model(client, name, timeout)), daemon=True)
    worker.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    stub_failed_at: float | None = None
    while worker.is_alive() and not done:
        worker.join(0.2)
        now = time.monotonic()
        if stub_failed_at is None and stub_failed(read_log(), name):
            stub_failed_at = now
        if stub_failed_at is not None and now - stub_failed_at > STUB_GRACE:
            return LoadOutcome(name, False, f"the Python-backend stub of '{name}' failed and the load hangs", True)
        if deadline is not None and now > deadline + 5:  # the client's own timeout should have fired
            return _hung(name, timeout)
        if not alive():
            break
    return done[0] if done else None
