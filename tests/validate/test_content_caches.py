"""What validate keeps per process from a file's content (ONNX graphs' inputs and outputs, what a
``model.py`` gave) is keyed by the scan's size and modification time: a changed file is read again, an
unchanged one gives the same findings as when it was read (issue 38: validate's speed)."""

from __future__ import annotations

import os
from pathlib import Path

from support.validate_repo_helpers import codes, make_model, onnx_bytes, validate

ONNX_CONFIG = '''name: "m"
backend: "onnxruntime"
max_batch_size: 0
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
'''
PY_CONFIG = '''name: "p"
backend: "python"
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
'''
GOOD_PY = "class TritonPythonModel:\n    def execute(self, requests):\n        return requests\n"
BAD_PY = GOOD_PY.replace("TritonPythonModel", "TritonPythonModeX")  # same size, no model class


def _touch(path: Path, content: bytes, mtime_ns: int) -> None:
    path.write_bytes(content)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_model_py_read_again_when_rewritten_with_same_size(tmp_path: Path) -> None:
    make_model(tmp_path, "p", PY_CONFIG, {1: {"model.py": BAD_PY}})
    path = tmp_path / "p" / "1" / "model.py"
    _touch(path, BAD_PY.encode(), 1_700_000_000_000_000_000)
    assert "RB407" in codes(validate(tmp_path))
    assert "RB407" in codes(validate(tmp_path))  # unchanged: the same finding from what was kept
    _touch(path, GOOD_PY.encode(), 1_700_000_001_000_000_000)
    assert len(GOOD_PY) == len(BAD_PY) and "RB407" not in codes(validate(tmp_path))


def test_onnx_graph_read_again_when_rewritten(tmp_path: Path) -> None:
    make_model(tmp_path, "m", ONNX_CONFIG)
    path = tmp_path / "m" / "1" / "model.onnx"
    _touch(path, onnx_bytes([("x", "FLOAT", [4])], [("y", "FLOAT", [4])]), 1_700_000_000_000_000_000)
    assert not codes(validate(tmp_path))
    assert not codes(validate(tmp_path))
    _touch(path, onnx_bytes([("z", "FLOAT", [4])], [("y", "FLOAT", [4])]), 1_700_000_001_000_000_000)
    assert "RB603" in codes(validate(tmp_path))  # the config's input x is no longer in the graph
