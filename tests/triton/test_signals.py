"""SIGTERM and SIGINT at a random point of ``validate --live`` and ``serve``: the same cleanup for both.

Afterwards no process of the run is left (server, Python stubs), no temporary or stage folder, and the
checked repository is byte for byte as it was (no ``__pycache__`` from the stubs).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.onnx_repo_factory import write_onnx_model
from support.process_output import processes_mentioning
from support.triton_repo_factory import DOUBLE_MODEL_PY, slow_model_py, write_python_model

pytestmark = pytest.mark.triton

SLOW_MODEL_PY = slow_model_py(2)


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}




def _wait_gone(text: str, timeout: float = 30) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := processes_mentioning(text)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.parametrize("command", ["validate", "serve"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_leaves_no_process_folder_or_change_when_sent_at_random_point(
    tmp_path: Path, command: str, sig: signal.Signals
) -> None:
    repo = tmp_path / "repo"
    write_python_model(repo, "double", max_batch_size=8, model_py=DOUBLE_MODEL_PY)
    write_python_model(repo, "slow", model_py=SLOW_MODEL_PY)
    write_onnx_model(repo, "scale")
    before = _snapshot(repo)
    scratch = tmp_path / "tmp"  # every temporary folder of the run lands here
    scratch.mkdir()
    # serve: scale (ONNX) cannot load on the embedded Triton; serving the rest keeps the signal's window open.
    argv = ["validate", str(repo), "--live"] if command == "validate" else ["serve", str(repo), "--allow-unavailable"]
    delay = random.uniform(0.5, 8.0)
    proc = subprocess.Popen(
        [sys.executable, "-m", "repo_builder", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    try:
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    where = f"{command} got {sig.name} after {delay:.1f} s (exit {proc.returncode}): {err[-600:]}"
    assert "Traceback" not in err, where
    # -SIGTERM: the signal came before the live part began (nothing started yet; the CLI's default action).
    assert proc.returncode in (0, 1, 130, -signal.SIGTERM), where
    assert _wait_gone(str(tmp_path)) == [], where
    # onnxruntime keeps a session-id file (.ses) in TMPDIR on purpose: not one of ours.
    assert [p.name for p in scratch.iterdir() if p.name != ".ses"] == [], where
    assert _snapshot(repo) == before, where
