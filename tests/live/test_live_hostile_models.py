"""``validate --live`` against models that misbehave on purpose (issue 20): one detaches a grandchild
(fork + setsid, and a double fork with a cleared environment), one floods the server log at load. The real
tritonserver runs them; nothing of the run may survive it, and memory stays flat."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.triton_repo_factory import write_python_model

from repo_builder.triton.server_log import LOG_READ_HEAD, LOG_READ_TAIL, log_text

pytestmark = pytest.mark.triton

REPO_BUILDER = str(Path(sys.executable).parent / "repo-builder")

DETACHING_MODEL_PY = """
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


def _detach(pid_file, clear_env):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:  # the grandchild: its parent exits, so it is nobody's child in the group
            if clear_env:
                os.execve("/bin/sleep", ["sleep", "600"], {})
            with open(pid_file, "w") as fh:
                fh.write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)


class TritonPythonModel:
    def initialize(self, args):
        _detach(os.path.join(PIDS, "daemon.pid"), clear_env=False)
        _detach(os.path.join(PIDS, "bare.pid"), clear_env=True)
        time.sleep(1)

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.ones(4, np.float32))]) for _ in requests]
"""

FLOODING_MODEL_PY = """
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        line = "x" * 1023 + "\\n"
        for _ in range(MEGABYTES * 1024):
            sys.stdout.write(line)
        sys.stdout.flush()

    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.ones(4, np.float32))]) for _ in requests]
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _sleepers_started_after(ticks: int) -> list[int]:
    """``sleep 600`` processes (the bare grandchild writes no pid file) started after ``ticks``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            started = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[19])
        except (OSError, ValueError, IndexError):
            continue
        if cmdline == b"sleep\x00600\x00" and started >= ticks and _alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def _now_ticks() -> int:
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])


def test_live_leaves_no_process_when_model_detaches_grandchildren(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    repo = tmp_path / "repo"
    write_python_model(repo, "detacher", model_py=DETACHING_MODEL_PY.replace("PIDS", repr(str(pids))))
    before = _now_ticks()
    done = subprocess.run([REPO_BUILDER, "validate", str(repo), "--live", "--no-gpu"],
                          capture_output=True, text=True, timeout=300)
    assert (pids / "daemon.pid").is_file(), done.stdout + done.stderr  # the model did detach
    daemon = int((pids / "daemon.pid").read_text())
    deadline = time.monotonic() + 5
    while (_alive(daemon) or _sleepers_started_after(before)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(daemon), f"detached grandchild {daemon} survived validate --live"
    assert not _sleepers_started_after(before), "a grandchild with a cleared environment survived"


def test_live_memory_stays_flat_when_model_floods_the_log(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    megabytes = 200
    write_python_model(repo, "flood", model_py=FLOODING_MODEL_PY.replace("MEGABYTES", str(megabytes)))
    done = subprocess.run(
        [sys.executable, "-c",
         "import re, sys\n"
         "from repo_builder.cli.main import main\n"
         "code = main(sys.argv[1:])\n"
         # VmHWM belongs to this process's own memory; ru_maxrss would carry the forking parent's size.
         "peak = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
         "print('PEAK', peak, file=sys.stderr)\n"
         "sys.exit(code)\n",
         "validate", str(repo), "--live", "--no-gpu"],
        capture_output=True, text=True, timeout=600,
    )
    peak_kib = int(done.stderr.rsplit("PEAK", 1)[1].split()[0])
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert peak_kib < 400 * 1024, f"peak RSS {peak_kib // 1024} MiB while the model printed {megabytes} MiB"


def test_log_text_reads_head_and_tail_only_when_log_is_huge(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with log.open("wb") as fh:
        fh.write(b"HEAD\n")
        fh.truncate(64 << 20)  # sparse: 64 MiB of log without writing it
        fh.seek(0, os.SEEK_END)
        fh.write(b"E1125 load failed: the reason\n")
    text = log_text(log)
    assert text.startswith("HEAD") and text.endswith("the reason\n")
    assert "bytes of the server log skipped" in text
    assert len(text) < LOG_READ_HEAD + LOG_READ_TAIL + 200
