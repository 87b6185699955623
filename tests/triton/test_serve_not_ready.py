"""``serve`` is ready only when every model is (issue 35): a model that does not load refuses the start
(exit 1, no ready file, no server left), unless ``--allow-unavailable`` serves what loaded."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.process_output import processes_mentioning, read_until, stop_if_running
from support.triton_repo_factory import (
    Ensemble,
    Step,
    Tensor,
    group_alive,
    write_double_repository,
    write_ensemble,
    write_python_model,
)

from repo_builder.errors import RefusedError
from repo_builder.triton.serving import ModelsNotReady, ServeSettings, serve

pytestmark = pytest.mark.triton

MISSING_IMPORT_PY = """
import definitely_missing_module_xyz


class TritonPythonModel:
    def execute(self, requests):
        return []
"""
MISSING = "ModuleNotFoundError: No module named 'definitely_missing_module_xyz'"


def _repository(root: Path) -> Path:
    """``double`` and ``pipeline`` (they load); ``broken`` (its stub cannot import) and ``broken_pipeline`` over it."""
    write_double_repository(root)
    write_python_model(root, "broken", model_py=MISSING_IMPORT_PY)
    write_ensemble(
        root,
        Ensemble(
            "broken_pipeline",
            (Tensor("X"),),
            (Tensor("Y"),),
            (Step("broken", (("INPUT0", "X"),), (("OUTPUT0", "Y"),)),),
        ),
    )
    return root




def test_serve_refuses_with_exit_1_and_no_ready_file_when_a_stub_fails(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    ready_file = tmp_path / "state" / "ready"
    ready_file.parent.mkdir()
    ready_file.write_text("grpc 127.0.0.1:1\n")  # an earlier run's: it must not say ready for this one
    done = subprocess.run(
        [sys.executable, "-m", "repo_builder", "serve", str(repo), "--ready-file", str(ready_file)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 1, done.stderr
    assert re.search(rf"^broken\s+1\s+UNAVAILABLE\s+.*{re.escape(MISSING)}", done.stdout, re.M), done.stdout
    assert re.search(r"^broken_pipeline\s+.*UNAVAILABLE\s+.*depends on 'broken'", done.stdout, re.M), done.stdout
    assert re.search(r"^double\s+1\s+READY", done.stdout, re.M), done.stdout
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("error: 2 of 4 models not ready: broken (" + MISSING + "), broken_pipeline ("), error
    assert "--allow-unavailable" in error and "Traceback" not in done.stderr
    assert "ready; press Ctrl-C" not in done.stderr
    assert not ready_file.exists()
    assert processes_mentioning(str(repo)) == []  # the server and its stubs were stopped before the exit


def test_serve_raises_refused_with_rows_when_called_from_python_and_a_member_fails(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    ready_file = tmp_path / "ready"
    with pytest.raises(ModelsNotReady) as caught, serve(repo, ServeSettings(ready_file=ready_file)):
        pytest.fail("serve must not yield while a model is not ready")
    assert isinstance(caught.value, RefusedError) and caught.value.exit_code == 1
    states = {row.name: row.state for row in caught.value.rows}
    assert states == {"broken": "UNAVAILABLE", "broken_pipeline": "UNAVAILABLE", "double": "READY", "pipeline": "READY"}
    assert MISSING in str(caught.value)
    assert not ready_file.exists()
    assert processes_mentioning(str(repo)) == []


def test_serve_refuses_when_a_hung_load_was_left_out_of_the_start(tmp_path: Path) -> None:
    repo = write_double_repository(tmp_path / "repo")
    write_python_model(repo, "nopy", model_py=None)  # its stub fails and 2.51's load hangs: left out, then refused
    with pytest.raises(ModelsNotReady) as caught, serve(repo):
        pytest.fail("serve must not yield while a model is not ready")
    assert str(caught.value).startswith("1 of 3 models not ready: nopy (its Python-backend stub failed"), caught.value
    assert processes_mentioning(str(repo)) == []


def test_serve_answers_with_good_models_when_allowed_unavailable(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    ready_file = tmp_path / "ready"
    with serve(repo, ServeSettings(ready_file=ready_file, allow_unavailable=True)) as serving:
        rows = {row.name: row for row in serving.rows}
        assert rows["broken"].state == "UNAVAILABLE" and MISSING in rows["broken"].reason
        assert rows["broken_pipeline"].state == "UNAVAILABLE"
        assert ready_file.read_text().startswith("grpc 127.0.0.1:")
        out = serving.server.infer("pipeline", {"X": np.ones((1, 4), np.float32)})
    assert np.array_equal(out["Y"], np.full((1, 4), 2.0, np.float32))
    assert not ready_file.exists()


def test_serve_cli_serves_loaded_models_when_allowed_unavailable(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    ready_file = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "repo_builder", "serve", str(repo), "--allow-unavailable", "--ready-file", str(ready_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = read_until(proc, "log ", timeout=120)
        assert re.search(rf"^broken\s+1\s+UNAVAILABLE\s+.*{re.escape(MISSING)}", out, re.M), out
        assert re.search(r"^pipeline\s+1\s+READY", out, re.M), out
        assert ready_file.exists()  # written before the table is printed
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        err = proc.stderr.read()  # type: ignore[union-attr]
    finally:
        stop_if_running(proc)
    assert proc.returncode == 0, err
    assert not ready_file.exists()
    pid = int(re.search(r"pid (\d+)", err).group(1))  # type: ignore[union-attr]
    assert not group_alive(pid)
