"""What a build records about its tuning: the model step's instances and threads in the JSON summary, and
pre/post steps with their own instance count (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from repo_builder.cli.main import main
from repo_builder.pipelines.settings import PipelineSettings
from repo_builder.pipelines.steps import python_step_config
from repo_builder.render import context as ctx
from repo_builder.render.environment import make_environment
from repo_builder.render.tuning import step_instances


def _instances(config_path: Path) -> int:
    config = text_format.Parse(config_path.read_text(), model_config_pb2.ModelConfig())
    return config.instance_group[0].count


def test_python_step_config_uses_step_instances_when_model_step_has_more() -> None:
    settings = PipelineSettings(name="m", runtime="python", instance_count=4, step_instance_count=1)
    text = python_step_config(
        make_environment(), "m_preprocess", settings,
        inputs=[ctx.tensor_context("TEXT", "object", [1])], outputs=[ctx.tensor_context("ids", "int64", [-1])], comment="test",
    )
    assert text_format.Parse(text, model_config_pb2.ModelConfig()).instance_group[0].count == 1


@pytest.mark.parametrize(("requested", "cores", "expected"), [(None, 2, (1, 2)), (None, 8, (1, 2)), (None, 1, (1, 1)), (3, 2, (3, 3))])
def test_step_instances_gives_decoding_the_cores_when_not_told(requested: int | None, cores: int, expected: tuple[int, int]) -> None:
    assert step_instances(requested, cores) == expected


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    from repo_builder.export.tiny_models import make_tiny_text_classifier  # torch: only this fixture needs it

    root = tmp_path_factory.mktemp("tuned")
    model = make_tiny_text_classifier(root / "tiny-bert", num_labels=2, seed=0)
    repo = root / "repo"
    args = ["build", "text-classifier", "--model", str(model), "--runtime", "python", "--out", str(repo), "--skip-parity",
            "--name", "t", "--instances", "3", "--intra-op-threads", "1", "--step-instances", "2", "--format", "json", "-q"]
    return args, repo


def test_build_summary_records_model_step_tuning_when_instances_given(built: tuple[list[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    args, repo = built
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["model_step"] == {"instances": 3, "intra_op_threads": 1}
    # The model step gets --instances; the Python pre/post steps get --step-instances, independently.
    assert _instances(repo / "t_model" / "config.pbtxt") == 3
    assert _instances(repo / "t_preprocess" / "config.pbtxt") == 2
    assert _instances(repo / "t_postprocess" / "config.pbtxt") == 2


def test_build_refuses_when_step_instances_is_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "resnet50", "--weights", "random", "--runtime", "python", "--out", str(tmp_path / "r"), "--step-instances", "0"])
    assert code == 2
    assert "--step-instances must be >= 1" in capsys.readouterr().err
