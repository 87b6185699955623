"""Everything a server's models started ends with the server, detached processes included (Linux).

Killing the server's process group ends the server and its Python stubs, but a model can start a process
that leaves the group: ``fork()`` + ``setsid()`` (a daemon), a double fork. Such a process is found by
two marks, and killed:

- **the run's token in its environment**: every server gets ``REPO_BUILDER_SERVER_RUN=<token>``, which
  every descendant inherits (``/proc/PID/environ`` shows the environment a process started with, even
  after it changes its own);
- **being our orphan**: while a server runs, repo-builder is a child subreaper
  (``prctl(PR_SET_CHILD_SUBREAPER)``), so a descendant whose parent exits is re-parented to us instead of
  to init. A process that is our child, started after the server, and is no server of ours, came from it.

The subreaper flag is set before the server starts, so no descendant can be re-parented past us. The
orphan mark cannot tell a server's orphan from a child the calling program itself started in a session of
its own after the server (the CLI starts none; a library caller running servers and such children at once
should know it). A cgroup would make both marks unnecessary; it needs privileges repo-builder does not
assume.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import signal
import threading
import time
from pathlib import Path
from typing import Any

RUN_VARIABLE = "REPO_BUILDER_SERVER_RUN"
_PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")
_lock = threading.Lock()
_servers: set[int] = set()  # pids of the servers we run (never taken for orphans)


def new_token() -> str:
    return secrets.token_hex(8)


@functools.cache
def _prctl() -> Any:
    import ctypes  # stdlib; only needed when a server starts

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _set_subreaper(on: bool) -> None:
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)


def server_started(pid: int) -> None:
    """Before the first server starts: become a subreaper (orphans come to us); remember the server."""
    with _lock:
        if not _servers:
            _set_subreaper(True)
        _servers.add(pid)


def server_stopped(pid: int) -> None:
    with _lock:
        _servers.discard(pid)
        if not _servers:
            _set_subreaper(False)


def subreaper_on() -> None:
    """Set before spawning (the server's pid is not known yet); ``server_started`` keeps it on."""
    with _lock:
        if not _servers:
            _set_subreaper(True)


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(parent pid, session id, start time in clock ticks since boot) of ``pid``, or None when gone."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces
    try:
        return int(fields[1]), int(fields[3]), int(fields[19])
    except (IndexError, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    stat = _stat(pid)
    return stat[2] if stat is not None else None


def _carries(pid: int, marker: bytes) -> bool:
    try:
        return marker in (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False  # gone, or another user's: not ours to end


def _pids() -> list[int]:
    try:
        return [int(p.name) for p in _PROC.iterdir() if p.name.isdigit()]
    except OSError:
        return []


def leftovers(token: str, since_ticks: int | None) -> list[int]:
    """Processes of the run ``token``: carrying it in their environment, or our orphans since it started."""
    me = os.getpid()
    my_session = os.getsid(0)
    marker = f"{RUN_VARIABLE}={token}".encode()
    with _lock:
        servers = set(_servers)
    found = []
    for pid in _pids():
        if pid == me or pid in servers:
            continue
        stat = _stat(pid)
        if stat is None:
            continue
        ppid, session, started = stat
        # Our own children (run by this process, in its session) are not the server's orphans.
        orphan = ppid == me and session != my_session and since_ticks is not None and started >= since_ticks
        if orphan or _carries(pid, marker):
            found.append(pid)
    return found


def end_leftovers(token: str, since_ticks: int | None, rounds: int = 5) -> list[int]:
    """SIGKILL every leftover of the run (again while new ones appear: a process may fork while we scan),
    and reap those that became our children. Returns the pids that were killed."""
    killed: list[int] = []
    for _ in range(rounds):
        found = leftovers(token, since_ticks)
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        _reap(found)
    return killed


def _reap(pids: list[int], wait: float = 2.0) -> None:
    """Collect the exit status of killed processes that are our children (orphans given to us)."""
    deadline = time.monotonic() + wait
    pending = set(pids)
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pending.discard(pid)  # not our child: init reaps it
                continue
            if done:
                pending.discard(pid)
        if pending:
            time.sleep(0.02)
