"""A two-model repository (a Python step behind an ensemble) that the bench and report tests measure."""

from __future__ import annotations

from pathlib import Path

DOUBLE_PY = '''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)])
            for r in requests
        ]
'''
DOUBLE_CONFIG = '''name: "double"
backend: "python"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]
dynamic_batching { }
instance_group [ { count: 1 kind: KIND_CPU } ]
'''
ENSEMBLE_CONFIG = '''name: "pipeline"
platform: "ensemble"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]
ensemble_scheduling { step [ { model_name: "double" model_version: -1 input_map { key: "X" value: "X" } output_map { key: "Y" value: "Y" } } ] }
'''


def write_repository(root: Path) -> Path:
    (root / "double" / "1").mkdir(parents=True)
    (root / "double" / "config.pbtxt").write_text(DOUBLE_CONFIG)
    (root / "double" / "1" / "model.py").write_text(DOUBLE_PY)
    (root / "pipeline" / "1").mkdir(parents=True)
    (root / "pipeline" / "config.pbtxt").write_text(ENSEMBLE_CONFIG)
    (root / "pipeline" / "1" / "placeholder.txt").write_text("keeps the folder")
    return root
