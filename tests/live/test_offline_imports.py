"""Offline ``repo-builder validate`` imports none of the live machinery (issue 22): no module of
``repo_builder.live``, no server launcher (``triton.server``, ``triton.process``), no gRPC client.

The CLI runs in a subprocess (``python -m repo_builder validate``, as the console script does) on a small
repository that exercises the offline flow (a Python model, an ensemble over it); at exit the process writes
``sys.modules``: every module it imported by any route (``-X importtime`` misses those loaded through
``importlib.import_module``, as the CLI loads its commands).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FORBIDDEN_PREFIXES = ("repo_builder.live", "repo_builder.triton.server", "repo_builder.triton.process", "grpc")

PY_CONFIG = """name: "double"
backend: "python"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]
instance_group [{ kind: KIND_CPU }]
"""
MODEL_PY = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""
ENSEMBLE_CONFIG = """name: "pipeline"
platform: "ensemble"
max_batch_size: 8
input [{ name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }]
ensemble_scheduling { step [{ model_name: "double" model_version: -1
  input_map { key: "INPUT0" value: "IN" } output_map { key: "OUTPUT0" value: "OUT" } }] }
"""


def write_repository(root: Path) -> Path:
    for name, config in (("double", PY_CONFIG), ("pipeline", ENSEMBLE_CONFIG)):
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(config)
    (root / "double" / "1" / "model.py").write_text(MODEL_PY)
    return root


DUMP_AT_EXIT = """
import atexit, runpy, sys
out, sys.argv = sys.argv[1], ["repo-builder", *sys.argv[2:]]
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
runpy.run_module("repo_builder", run_name="__main__")
"""


def imported_modules(args: list[str], cwd: Path) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Every module ``python -m repo_builder ARGS`` imported: ``sys.modules`` as the process exits."""
    out = cwd / "modules.txt"
    done = subprocess.run(
        [sys.executable, "-c", DUMP_AT_EXIT, str(out), *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    return set(out.read_text().split()) if out.exists() else set(), done


def forbidden(names: set[str]) -> list[str]:
    return sorted(n for n in names if n.startswith(FORBIDDEN_PREFIXES))


@pytest.mark.parametrize("fmt", ["text", "sarif"])
def test_offline_validate_imports_no_live_module_when_live_is_not_given(tmp_path: Path, fmt: str) -> None:
    repo = write_repository(tmp_path / "models")
    names, done = imported_modules(["validate", str(repo), "--format", fmt], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert {"repo_builder.cli.validate", "repo_builder.validate.engine"} <= names  # the offline flow ran here
    assert forbidden(names) == []


def test_python_api_validate_imports_no_live_module_when_live_is_false(tmp_path: Path) -> None:
    repo = write_repository(tmp_path / "models")
    # sys.modules at the end: every module the call imported, by whatever route.
    code = f"import repo_builder, sys; assert repo_builder.validate({str(repo)!r}).ok; print(*sorted(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    names = set(done.stdout.split())
    assert {"repo_builder.api", "repo_builder.validate.engine"} <= names
    assert forbidden(names) == []


def test_import_check_sees_live_modules_when_validate_live_is_asked_for(tmp_path: Path) -> None:
    # --live with a --tritonserver that does not exist: the live flow is imported, then refuses to start.
    repo = write_repository(tmp_path / "models")
    names, done = imported_modules(["validate", str(repo), "--live", "--tritonserver", str(tmp_path / "none")], tmp_path)
    assert done.returncode in (2, 3), done.stderr[-2000:]
    assert {"repo_builder.live.location", "repo_builder.live.judge", "repo_builder.triton.server"} <= set(forbidden(names))
