"""Reading a running command's stdout in tests (serve prints its table, then waits for a signal)."""

from __future__ import annotations

import queue
import subprocess
import threading
import time


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
