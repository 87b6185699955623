"""``repo-builder serve`` is ready only when its models are: polled from the very start."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.process_output import read_until
from support.triton_repo_factory import (
    group_alive,
    slow_model_py,
    write_double_repository,
    write_python_model,
)

from repo_builder.triton.ports import free_port

pytestmark = pytest.mark.triton

SLOW_MODEL_PY = slow_model_py(4)
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _status(url: str) -> int | None:
    try:
        with _DIRECT.open(url, timeout=1) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return None


class _Poller(threading.Thread):
    """Polls /v2/health/ready and the ready file; records whether 'slow' was ready each time they said so."""

    def __init__(self, http: str, ready_file: Path) -> None:
        super().__init__(daemon=True)
        self.http, self.ready_file = http, ready_file
        self.stop = False
        self.seen: list[tuple[str, int | None]] = []  # (what said ready, status of /v2/models/slow/ready)

    def run(self) -> None:
        while not self.stop:
            if _status(f"{self.http}/v2/health/ready") == 200:
                self.seen.append(("endpoint", _status(f"{self.http}/v2/models/slow/ready")))
            if self.ready_file.exists():
                self.seen.append(("file", _status(f"{self.http}/v2/models/slow/ready")))
            time.sleep(0.05)


def test_serve_is_not_ready_before_its_models_when_polled_from_start(tmp_path: Path) -> None:
    repo = write_double_repository(tmp_path / "repo")
    write_python_model(repo, "slow", model_py=SLOW_MODEL_PY)
    write_python_model(repo, "nopy", model_py=None)  # its stub fails: Triton 2.51 would never finish starting
    port, ready_file, log = free_port(), tmp_path / "state" / "ready", tmp_path / "logs" / "triton.log"
    poller = _Poller(f"http://127.0.0.1:{port}", ready_file)
    poller.start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "repo_builder", "serve", str(repo), "--http-port", str(port),
         "--ready-file", str(ready_file), "--keep-log", str(log), "--allow-unavailable"],  # nopy: listed, left out
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = read_until(proc, "log ", timeout=120)
        assert ready_file.read_text().startswith("grpc 127.0.0.1:"), out
        time.sleep(0.3)
        poller.stop = True  # what the server says while it shuts down is not the question
        poller.join(5)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        err = proc.stderr.read()  # type: ignore[union-attr]
    finally:
        poller.stop = True
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert re.search(r"^nopy\s+.*UNAVAILABLE.*stub failed.*left out", out, re.M), out
    assert {what for what, _ in poller.seen} == {"endpoint", "file"}
    assert all(status == 200 for _, status in poller.seen), [s for s in poller.seen if s[1] != 200]  # never ready before 'slow' was
    assert "loaded slow" in err and err.index("loaded slow") < err.index("ready; press Ctrl-C")
    assert not ready_file.exists()  # removed on exit: a stale file would lie to the next probe
    assert "successfully loaded 'slow'" in log.read_text()  # --keep-log keeps the server's log
    assert not list(repo.rglob("__pycache__"))
    pid = int(err.split("pid ", 1)[1].split(")")[0])
    assert not group_alive(pid)
