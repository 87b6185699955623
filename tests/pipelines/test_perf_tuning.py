"""The model step's thread layout: defaults from the cores, the CLI options, and what model.py does with them."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format
from support.perf_steps import model_config, write_onnx_model
from tritonclient.grpc import model_config_pb2

from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.pipelines.model_step import render_model_step
from repo_builder.pipelines.settings import ModelSource, PipelineSettings
from repo_builder.render.environment import make_environment
from repo_builder.render.tuning import available_cores, tune_model_step
from repo_builder.spec import Signature, TensorSpec


def test_tune_model_step_splits_cores_when_nothing_is_given() -> None:
    assert tune_model_step(None, None, cores=2) == tune_model_step(2, 1, cores=2)
    assert tune_model_step(None, None, cores=1).instance_count == 1
    assert tune_model_step(None, None, cores=16).intra_op_threads == 8
    assert tune_model_step(3, None, cores=2).intra_op_threads == 1  # never 0 threads by division


def test_tune_model_step_refuses_when_counts_are_negative() -> None:
    with pytest.raises(UserError, match="--instances"):
        tune_model_step(0, None, cores=2)
    with pytest.raises(UserError, match="--intra-op-threads"):
        tune_model_step(1, -1, cores=2)


def test_available_cores_counts_affinity_when_on_linux() -> None:
    import os

    assert 1 <= available_cores() <= len(os.sched_getaffinity(0))


def _model_config(runtime: str, instances: int, threads: int) -> model_config_pb2.ModelConfig:
    signature = Signature(inputs=(TensorSpec("x", "float32", ("batch", 4)),), outputs=(TensorSpec("y", "float32", ("batch", 2)),))
    settings = PipelineSettings("m", runtime, instance_count=instances, intra_op_threads=threads)
    model = render_model_step(make_environment(), ModelSource(signature, {}), settings, 1, "test")
    return text_format.Parse(model.config_text, model_config_pb2.ModelConfig())


@pytest.mark.parametrize("runtime", ["python", "onnxruntime"])
def test_render_model_step_records_threads_when_tuned(runtime: str) -> None:
    config = _model_config(runtime, instances=2, threads=3)
    assert config.instance_group[0].count == 2
    assert config.parameters["intra_op_thread_count"].string_value == "3"
    assert config.parameters["inter_op_thread_count"].string_value == "1"
    if runtime == "python":
        assert config.parameters["allow_spinning"].string_value == "0"


def _session_options(tmp_path: Path, parameters: dict[str, str], instances: int):
    from accuracy import load_step

    module = load_step(write_onnx_model(tmp_path), f"onnx_step_{len(parameters)}_{instances}")
    return module.session_options(model_config(parameters, instances)), module


def test_onnx_model_step_reads_threads_when_config_has_them(tmp_path: Path) -> None:
    options, _ = _session_options(tmp_path, {"intra_op_thread_count": "3", "inter_op_thread_count": "1", "allow_spinning": "0"}, 2)
    assert options.intra_op_num_threads == 3
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"


def test_onnx_model_step_shares_cores_when_threads_are_zero(tmp_path: Path) -> None:
    options, module = _session_options(tmp_path, {"intra_op_thread_count": "0"}, 2)
    assert options.intra_op_num_threads == max(1, module.available_cores() // 2)
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"  # off unless asked for


def test_build_refuses_when_instances_is_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "resnet50", "--weights", "random", "--runtime", "python", "--out", str(tmp_path / "r"), "--instances", "0"])
    assert code == 2
    assert "--instances must be >= 1" in capsys.readouterr().err
