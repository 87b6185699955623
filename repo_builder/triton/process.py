"""Process supervision for tritonserver: spawn it in its own process group, wait, stop the whole group.

The server leads its own session (so a Ctrl-C in the terminal reaches us, and we stop it in order) and
is stopped with SIGTERM, then SIGKILL for the whole group: a server whose load hangs ignores SIGTERM, and
Python-backend stubs live in the same group. The child also gets SIGKILL if we die (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.triton import descendants

_PR_SET_PDEATHSIG = 1


@functools.cache
def _direct_opener() -> Any:
    """Health checks go straight to the server: an http_proxy in the environment must not catch them."""
    import urllib.request  # stdlib, but ~20 ms: `repo-builder validate` imports this module without --live

    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


@functools.cache
def _prctl() -> Any:
    """libc's prctl, loaded in the parent: nothing may be imported between fork and exec."""
    import ctypes  # stdlib; only needed when a server starts

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _die_with_parent(prctl: Any) -> None:
    """In the child: get SIGKILL if the process that started us dies (Linux), so nothing is left behind."""
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@functools.cache
def _setpriv() -> str | None:
    """util-linux's setpriv, when it can set the parent-death signal (2.33+): the child then dies with us
    without a ``preexec_fn``."""
    path = shutil.which("setpriv")
    if path is None:
        return None
    try:
        usage = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "--pdeathsig" in usage else None


def _death_signal_setup(args: Sequence[str]) -> tuple[list[str], Any]:
    """The command and ``preexec_fn`` that make the child die with us.

    A ``preexec_fn`` forces a plain fork(), which runs gRPC's fork handlers: in a process with live gRPC
    threads (a tritonclient in use) that fork can deadlock. setpriv sets the signal after a vfork-style
    spawn instead; without it, the prctl hook is used only while gRPC is not loaded.
    """
    setpriv = _setpriv()
    if setpriv is not None:
        return [setpriv, "--pdeathsig", "KILL", "--", *args], None
    if "grpc" in sys.modules:
        return list(args), None
    return list(args), functools.partial(_die_with_parent, _prctl())


def spawn(args: Sequence[str], env: Mapping[str, str], cwd: Path, log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``args`` with stdout and stderr appended to ``log_path``, in a new session, marked so that
    ``stop_group`` finds every process it leaves (``descendants.py``)."""
    command, preexec = _death_signal_setup(args)
    token = descendants.new_token()
    descendants.subreaper_on()  # before the fork: a model's orphans must come to us, not to init
    try:
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**env, descendants.RUN_VARIABLE: token},
                cwd=cwd,
                start_new_session=True,
                preexec_fn=preexec,
            )
    except BaseException:
        descendants.server_stopped(-1)  # no server after all: drop the flag unless another one runs
        raise
    descendants.server_started(proc.pid)
    proc.repo_builder_run = (token, descendants.start_ticks(proc.pid))  # type: ignore[attr-defined]
    return proc


def answers(url: str, timeout: float = 2.0) -> bool:
    """True when GET ``url`` answers 200 (a health endpoint)."""
    try:
        with _direct_opener().open(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except OSError:  # urllib.error.URLError is an OSError
        return False


def stop_group(proc: subprocess.Popen[bytes], *, grace: float, force: bool = False) -> None:
    """SIGTERM the process group (unless ``force``), wait ``grace``, then SIGKILL what is left, and reap."""
    pgid = proc.pid  # the server leads its own session, so its group id is its pid
    if proc.poll() is None and not force:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    # SIGKILL whatever is left in the group (a hung server, Python-backend stubs), and reap it.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.2)
        time.sleep(0.05)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    run = getattr(proc, "repo_builder_run", None)
    if run is not None:  # what the models started and detached from the group (fork + setsid ...)
        descendants.end_leftovers(*run)
        descendants.server_stopped(proc.pid)


def remove_shared_memory(prefix: str) -> None:
    """A killed Python backend leaves its shared-memory regions behind; ours carry a unique prefix."""
    shm = Path("/dev/shm")
    if not prefix or not shm.is_dir():
        return
    for region in shm.glob(f"{prefix}*"):
        with contextlib.suppress(OSError):
            region.unlink()


def exit_description(code: int | None) -> str:
    if code is not None and code < 0:
        return f"was killed by signal {-code}"
    return f"exited with code {code}"
