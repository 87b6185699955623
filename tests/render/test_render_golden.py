"""Rendered configs equal the golden files and parse with Triton's ModelConfig proto; model.py compiles."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from google.protobuf import text_format
from support.render_signatures import image_signature, source_for, text_signature, versions_for
from tritonclient.grpc import model_config_pb2

from repo_builder.pipelines.image_classification import render_image_pipeline
from repo_builder.pipelines.settings import PipelineSettings
from repo_builder.pipelines.text_classification import render_text_pipeline
from repo_builder.render.environment import make_environment

GOLDEN = Path(__file__).parent / "golden"
# UPDATE_GOLDEN=1 rewrites the golden files from the current templates (review the diff!).
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def render(kind: str, runtime: str, tmp_path: Path) -> tuple:
    env = make_environment()
    if kind == "image":
        sig = image_signature()
        settings = PipelineSettings("resnet50", runtime, max_batch_size=8, top_k=5)
        labels = [f"class {i}" for i in range(1000)]
        return render_image_pipeline(env, source_for(sig, runtime), sig, labels, settings, versions_for("resnet50"))
    sig = text_signature()
    tok = tmp_path / "tokenizer"
    tok.mkdir()
    (tok / "tokenizer.json").write_text("{}")
    settings = PipelineSettings("text_classifier", runtime, max_batch_size=6, top_k=5)
    return render_text_pipeline(env, source_for(sig, runtime), sig, ["neg", "neu", "pos"], settings, versions_for("text_classifier"), tok)


CASES = [(kind, runtime) for kind in ("image", "text") for runtime in ("python", "onnxruntime", "tensorrt")]


@pytest.mark.parametrize(("kind", "runtime"), CASES)
def test_render_configs_match_golden_when_rendered_from_signature(kind: str, runtime: str, tmp_path: Path) -> None:
    for model in render(kind, runtime, tmp_path):
        # Every config parses with Triton's own proto, whatever the golden file says.
        config = text_format.Parse(model.config_text, model_config_pb2.ModelConfig())
        assert config.name == model.name
        golden = GOLDEN / f"{kind}-{runtime}" / f"{model.role}.pbtxt"
        if UPDATE:
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(model.config_text)
        assert model.config_text == golden.read_text(), f"{golden} differs; UPDATE_GOLDEN=1 to accept"


@pytest.mark.parametrize(("kind", "runtime"), CASES)
def test_render_model_sources_compile_when_rendered(kind: str, runtime: str, tmp_path: Path) -> None:
    sources = 0
    for model in render(kind, runtime, tmp_path):
        for rel, content in model.files.items():
            if rel.endswith(".py"):
                compile(content, f"{model.name}/{rel}", "exec")
                sources += 1
    # preprocess + postprocess, and the model itself for the python runtime
    assert sources == (3 if runtime == "python" else 2)


@pytest.mark.parametrize(("kind", "runtime"), CASES)
def test_render_ensemble_wires_steps_when_rendered(kind: str, runtime: str, tmp_path: Path) -> None:
    models = {m.role: m for m in render(kind, runtime, tmp_path)}
    configs = {role: text_format.Parse(m.config_text, model_config_pb2.ModelConfig()) for role, m in models.items()}
    ensemble = configs.pop("ensemble")
    assert ensemble.platform == "ensemble"
    assert ensemble.max_batch_size <= min(c.max_batch_size for c in configs.values())
    steps = ensemble.ensemble_scheduling.step
    assert [s.model_name for s in steps] == [models[r].name for r in ("preprocess", "model", "postprocess")]
    assert all(s.model_version == -1 for s in steps)
    assert "model_version: -1" in models["ensemble"].config_text
    # Each step's map keys are real tensors of its member, with matching types along the graph.
    produced = {t.name: t.data_type for t in ensemble.input}
    for step in steps:
        member = configs[next(r for r, m in models.items() if m.name == step.model_name)]
        member_inputs = {t.name: t.data_type for t in member.input}
        for key, value in step.input_map.items():
            assert member_inputs[key] == produced[value]
        member_outputs = {t.name: t.data_type for t in member.output}
        for key, value in step.output_map.items():
            produced[value] = member_outputs[key]
    assert {t.name: t.data_type for t in ensemble.output}.items() <= produced.items()
    assert list(models["ensemble"].files) == ["placeholder.txt"]


@pytest.mark.parametrize("runtime", ["python", "onnxruntime", "tensorrt"])
def test_render_instance_kind_matches_runtime_when_rendered(runtime: str, tmp_path: Path) -> None:
    models = {m.role: m for m in render("image", runtime, tmp_path)}
    kinds = {}
    for role in ("preprocess", "model", "postprocess"):
        config = text_format.Parse(models[role].config_text, model_config_pb2.ModelConfig())
        kinds[role] = model_config_pb2.ModelInstanceGroup.Kind.Name(config.instance_group[0].kind)
        assert config.dynamic_batching.preferred_batch_size, role
        assert max(config.dynamic_batching.preferred_batch_size) <= config.max_batch_size
    assert kinds["preprocess"] == kinds["postprocess"] == "KIND_CPU"
    assert kinds["model"] == ("KIND_GPU" if runtime == "tensorrt" else "KIND_CPU")
