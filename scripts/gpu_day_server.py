"""The GPU-day stages' tritonserver (inside the Triton container): started on a repository with its log in a
file, stopped however the stage ends, the log's tail kept for the record. Shared by gpu_day.py and
gpu_day_dali.py so both stop the server the same way."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LOG_TAIL = 6000  # characters of the server's log kept in the record


@contextmanager
def tritonserver(repository: Path, log_path: Path, *flags: str) -> Iterator[dict[str, Any]]:
    """tritonserver on ``repository`` (HTTP on 8000, ``--exit-on-error=false`` so one bad model does not stop
    the others) for the ``with`` block; the yielded dict gets ``server_log_tail`` once the server is stopped."""
    after: dict[str, Any] = {}
    with open(log_path, "w") as log:
        server = subprocess.Popen(["tritonserver", f"--model-repository={repository}", "--exit-on-error=false", *flags,
                                   "--http-port=8000"], stdout=log, stderr=subprocess.STDOUT)
    try:
        yield after
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
        after["server_log_tail"] = log_path.read_text(errors="replace")[-LOG_TAIL:]
