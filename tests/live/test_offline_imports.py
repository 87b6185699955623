"""Offline ``repo-builder validate`` imports none of the live machinery (issue 22): no module of
``repo_builder.live``, no server launcher (``triton.server``, ``triton.process``), no gRPC client.

The CLI runs in a subprocess under ``python -X importtime``, which prints every module the process imports,
on a small repository that exercises the whole offline flow (a Python model, an ONNX model, an ensemble).
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


def imported_modules(args: list[str], cwd: Path) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """Every module a ``python -X importtime ARGS`` process imported, from its import-time lines."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }
    return names, done


def forbidden(names: set[str]) -> list[str]:
    return sorted(n for n in names if n.startswith(FORBIDDEN_PREFIXES))


@pytest.mark.parametrize("fmt", ["text", "sarif"])
def test_offline_validate_imports_no_live_module_when_live_is_not_given(tmp_path: Path, fmt: str) -> None:
    repo = write_repository(tmp_path / "models")
    names, done = imported_modules(["-m", "repo_builder", "validate", str(repo), "--format", fmt], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert "repo_builder.validate.engine" in names  # the offline flow did run in this process
    assert forbidden(names) == []


def test_import_check_sees_live_modules_when_the_live_flow_is_imported(tmp_path: Path) -> None:
    names, done = imported_modules(["-c", "import repo_builder.live.location"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert {"repo_builder.live.judge", "repo_builder.triton.server", "repo_builder.triton.process"} <= set(forbidden(names))
