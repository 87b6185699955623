"""A running command in tests: reading its stdout (serve prints its table, then waits for a signal), stopping it."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from pathlib import Path


def read_until(proc: subprocess.Popen[str], marker: str, timeout: float) -> str:
    """stdout until a line starting with ``marker``, the process's end, or the timeout (a thread reads, so a
    silent process cannot block the test past its timeout)."""
    assert proc.stdout is not None
    stdout = proc.stdout
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    text, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        text += line
        if line.startswith(marker):
            break
    return text


def stop_if_running(proc: subprocess.Popen[str], grace: float = 30.0) -> None:
    """After a failed test: SIGTERM first, so serve stops its own tritonserver, then SIGKILL after ``grace``."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def processes_mentioning(text: str) -> list[str]:
    """Processes (not this one) whose command line contains ``text``: what a stopped server left behind."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found
