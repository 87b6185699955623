"""``repo-builder serve`` in a subprocess: the table, the endpoints, and a clean stop on a signal."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.process_output import read_until, stop_if_running
from support.triton_repo_factory import group_alive, write_double_repository, write_python_model

pytestmark = pytest.mark.triton



@pytest.mark.parametrize(("mode", "sig"), [("explicit", signal.SIGINT), ("poll", signal.SIGTERM)])
def test_serve_prints_table_and_stops_cleanly_when_signalled(tmp_path: Path, mode: str, sig: int) -> None:
    repo = write_double_repository(tmp_path / "repo")
    write_python_model(repo, "renamed", config='name: "other"\nbackend: "python"\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "repo_builder", "serve", str(repo), "--model-control-mode", mode, "--allow-unavailable"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = read_until(proc, "log ", timeout=120)
        assert re.search(r"^pipeline\s+1\s+READY", out, re.M), out
        assert re.search(r"^double\s+1\s+READY", out, re.M), out
        assert re.search(r"^renamed\s+.*UNAVAILABLE.*directory name must equal model name", out, re.M), out
        grpc = re.search(r"^gRPC\s+127\.0\.0\.1:(\d+)$", out, re.M)
        assert grpc is not None, out
        proc.send_signal(sig)
        proc.wait(timeout=60)
        err = proc.stderr.read()  # type: ignore[union-attr]
    finally:
        stop_if_running(proc)  # the test failed: stop it the clean way first
    assert proc.returncode == 0, err
    assert "stopped" in err
    pid = int(re.search(r"pid (\d+)", err).group(1))  # type: ignore[union-attr]
    assert not group_alive(pid)


def test_serve_exits_with_one_line_error_when_path_missing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "repo_builder", "serve", str(tmp_path / "absent")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error:") and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--grpc-port", "8100", "--http-port", "8100"], "--grpc-port and --http-port are both 8100", 2),
        (["--host", "not a host"], "--host 'not a host'", 2),
        (["--load-timeout", "-1"], "--load-timeout -1", 2),
        (["--tritonserver", "/bin/false"], "tritonserver exited with code 1 during start-up", 3),
    ],
)
def test_serve_exits_with_one_line_error_when_options_are_wrong(
    tmp_path: Path, args: list[str], message: str, code: int
) -> None:
    repo = write_double_repository(tmp_path / "repo")
    (tmp_path / "tmp").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "repo_builder", "serve", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(tmp_path / "tmp")},  # a failed start keeps its log (the error names it)
    )
    assert done.returncode == code, done.stderr
    assert done.stderr.strip().startswith("error:") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert message in done.stderr
