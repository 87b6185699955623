"""Ensemble tensor shapes between a producer and its consumers when a member's tensors come from its ONNX
graph (auto-complete), and ``--gpus N`` for instance groups (issue 20). Triton's messages are core's
(``ensemble_utils.cc``, ``model_config_utils.cc``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.validate_repo_helpers import codes, make_model, messages, onnx_bytes, validate

from repo_builder.cli.main import main

MODEL_PY = "class TritonPythonModel:\n    def execute(self, requests):\n        return requests\n"


def _pipeline(root: Path, consumer_dims: str) -> Path:
    """encoder (ONNX, no tensors in its config: filled from the graph, output [-1,-1,97], no batching
    since its input's first dimension is fixed) -> decoder (Python, input dims as given)."""
    graph = onnx_bytes([("ids", "INT64", [1, "T"])], [("logits", "FLOAT", ["B", "T", 97])])
    make_model(root, "encoder", 'name: "encoder"\nbackend: "onnxruntime"\n', {1: {"model.onnx": graph}})
    make_model(
        root, "decoder",
        f'name: "decoder"\nbackend: "python"\ninput [{{ name: "x" data_type: TYPE_FP32 dims: {consumer_dims} }}]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [-1] }]\n',
        {1: {"model.py": MODEL_PY}},
    )
    make_model(
        root, "pipeline",
        'name: "pipeline"\nplatform: "ensemble"\n'
        'input [{ name: "IDS" data_type: TYPE_INT64 dims: [1, -1] }]\n'
        'output [{ name: "OUT" data_type: TYPE_FP32 dims: [-1] }]\n'
        'ensemble_scheduling { step [\n'
        '  { model_name: "encoder" model_version: -1 input_map { key: "ids" value: "IDS" } output_map { key: "logits" value: "mid" } },\n'
        '  { model_name: "decoder" model_version: -1 input_map { key: "x" value: "mid" } output_map { key: "y" value: "OUT" } }\n'
        '] }\n',
        {1: {".keep": ""}},
    )
    return root


def test_ensemble_refused_with_tritons_message_when_onnx_producer_rank_differs(tmp_path: Path) -> None:
    report = validate(_pipeline(tmp_path, "[-1, -1]"), gpu_present=False)
    assert "RB510" in codes(report, "pipeline"), report.diagnostics
    assert messages(report, "RB510") == [
        "in ensemble pipeline, ensemble tensor mid: inconsistent shape: [-1,-1,97] is inferred from model "
        "encoder while [-1,-1] is inferred from model decoder"
    ]


def test_ensemble_refused_when_onnx_producer_fixed_dim_differs(tmp_path: Path) -> None:
    report = validate(_pipeline(tmp_path, "[-1, -1, 96]"), gpu_present=False)
    assert any("[-1,-1,97]" in m and "[-1,-1,96]" in m for m in messages(report, "RB510"))


def test_ensemble_passes_when_onnx_producer_matches_consumer(tmp_path: Path) -> None:
    report = validate(_pipeline(tmp_path, "[-1, -1, 97]"), gpu_present=False)
    assert "RB510" not in codes(report) and report.ok, report.diagnostics


def _gpu_model(root: Path, gpus: str, kind: str = "KIND_GPU") -> Path:
    make_model(root, "m", f'name: "m"\nbackend: "python"\ninstance_group [{{ kind: {kind} gpus: {gpus} }}]\n',
               {1: {"model.py": MODEL_PY}})
    return root


def test_validate_refuses_gpu_id_with_tritons_message_when_target_has_fewer_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _gpu_model(tmp_path, "[42]")
    assert main(["validate", str(repo), "--gpus", "2"]) == 1
    assert "specifies invalid or unsupported gpu id 42. GPUs with at least the minimum required CUDA compute " \
           "compatibility of 6.000000 are: 0, 1" in capsys.readouterr().out
    assert main(["validate", str(repo), "--gpus", "43"]) == 0


def test_validate_says_unknown_not_pass_when_gpu_count_not_given(tmp_path: Path) -> None:
    report = validate(_gpu_model(tmp_path, "[42]"))
    infos = [d for d in report.diagnostics if d.code == "RB306"]
    assert report.ok and [d.severity.value for d in infos] == ["info"]
    assert "--gpus" in (infos[0].hint or "")
    assert not [d for d in validate(_gpu_model(tmp_path / "zero", "[0]")).diagnostics if d.code == "RB306"]


def test_kind_auto_with_missing_gpu_becomes_cpu_when_gpus_given(tmp_path: Path) -> None:
    report = validate(_gpu_model(tmp_path, "[3]", "KIND_AUTO"), gpu_count=2)
    assert messages(report, "RB306") == ["instance group m_0 of model m has kind KIND_CPU but specifies one or more GPUs"]


def test_validate_exits_2_when_gpus_contradicts_no_gpu(tmp_path: Path) -> None:
    assert main(["validate", str(_gpu_model(tmp_path, "[0]")), "--gpus", "2", "--no-gpu"]) == 2


def test_python_api_validate_judges_gpu_ids_when_gpus_given(tmp_path: Path) -> None:
    import repo_builder

    repo = _gpu_model(tmp_path, "[1]")
    assert not repo_builder.validate(repo, gpus=1).ok
    assert repo_builder.validate(repo, gpus=2).ok
