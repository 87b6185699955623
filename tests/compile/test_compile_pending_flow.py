"""The deferred flow end to end on a machine without a GPU: defer, validate (pending), compile-pending fails
cleanly and leaves the repository byte for byte as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from support.trt_fixtures import IMAGE_SIGNATURE, TENSORRT_CONFIG, make_image_onnx, tree_digest
from tritonclient.grpc import model_config_pb2

from repo_builder.cli.main import main
from repo_builder.compile import (
    CompileSettings,
    defer_plan,
    find_pending,
    read_recipe,
    update_config_text,
)
from repo_builder.compile.plan import require_build_environment
from repo_builder.compile.trtexec import find_trtexec
from repo_builder.errors import ToolError
from repo_builder.gpu import gpu_present
from repo_builder.plan_format import tensorrt_available
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Severity, ValidateOptions

no_gpu = pytest.mark.skipif(gpu_present(), reason="checks the behaviour on a machine without a GPU")


@pytest.fixture
def deferred_repo(tmp_path: Path) -> Path:
    onnx_path = make_image_onnx(tmp_path / "export" / "model.onnx")
    repo = tmp_path / "repo"
    (repo / "classifier").mkdir(parents=True)
    (repo / "classifier" / "config.pbtxt").write_text(TENSORRT_CONFIG)
    defer_plan(onnx_path, IMAGE_SIGNATURE, repo / "classifier" / "1", CompileSettings(max_batch_size=8))
    return repo


def test_defer_plan_writes_source_onnx_and_recipe_when_deferred(deferred_repo: Path):
    version = deferred_repo / "classifier" / "1"
    assert sorted(p.name for p in version.iterdir()) == ["compile.json", "model.source.onnx"]
    recipe = read_recipe(version / "compile.json")
    assert recipe.signature == IMAGE_SIGNATURE
    assert recipe.profiles[0]["input"].max == (8, 3, 8, 8)
    assert recipe.settings.precision == "fp16" and recipe.onnx == "model.source.onnx"
    assert len(recipe.onnx_sha256) == 64


def test_find_pending_lists_the_version_when_recipe_has_no_plan(deferred_repo: Path):
    pending = find_pending(deferred_repo)
    assert [(p.model, p.version) for p in pending] == [("classifier", "1")]
    (deferred_repo / "classifier" / "1" / "model.plan").write_bytes(b"plan")
    assert find_pending(deferred_repo) == []


def test_validate_reports_pending_plan_as_error_unless_allowed(deferred_repo: Path):
    strict = [d for d in validate_repository(deferred_repo).diagnostics if d.code == "RB701"]
    assert [(d.severity, d.model, d.version) for d in strict] == [(Severity.ERROR, "classifier", 1)]
    allowed = validate_repository(deferred_repo, ValidateOptions(allow_pending=True)).diagnostics
    assert [d.severity for d in allowed if d.code == "RB701"] == [Severity.WARNING]


@no_gpu
def test_compile_pending_exits_3_with_one_line_and_leaves_repo_unchanged_when_no_gpu(deferred_repo: Path, capsys):
    before = tree_digest(deferred_repo)
    code = main(["compile-pending", str(deferred_repo)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3  # an environment failure (no GPU), not a usage error
    assert err[-1].startswith("error: cannot build a TensorRT plan here: no NVIDIA GPU found")
    assert len([line for line in err if line.startswith("error:")]) == 1
    assert tree_digest(deferred_repo) == before


@no_gpu
def test_compile_cli_exits_3_with_one_line_and_writes_nothing_when_no_gpu(tmp_path: Path, capsys):
    onnx_path = make_image_onnx(tmp_path / "export" / "model.onnx")
    out = tmp_path / "out"
    code = main(["compile", str(onnx_path), "--out", str(out), "--precision", "fp16"])
    captured = capsys.readouterr()
    assert code == 3
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: cannot build a TensorRT plan here")
    assert "Traceback" not in captured.err
    assert not out.exists()


def test_compile_cli_exits_2_naming_option_when_profile_malformed(tmp_path: Path, capsys):
    onnx_path = make_image_onnx(tmp_path / "export" / "model.onnx")
    code = main(["compile", str(onnx_path), "--out", str(tmp_path / "out"), "--profile", "input:1x3x8x8"])
    assert code == 2
    assert "three shapes" in capsys.readouterr().err


def test_compile_pending_reports_nothing_to_do_and_validates_when_no_recipes(tmp_path: Path, capsys):
    repo = tmp_path / "repo"
    (repo / "classifier" / "1").mkdir(parents=True)
    (repo / "classifier" / "config.pbtxt").write_text(TENSORRT_CONFIG)
    (repo / "classifier" / "1" / "model.plan").write_bytes(b"not a real plan")
    code = main(["compile-pending", str(repo), "--no-validate"])
    assert code == 0
    assert "no pending TensorRT plans" in capsys.readouterr().err


def test_update_config_text_sets_max_batch_and_keeps_comments_when_batching():
    new = update_config_text(TENSORRT_CONFIG, max_batch_size=4)
    assert new.startswith("# rendered for the tests")
    config = text_format.Parse(new, model_config_pb2.ModelConfig())
    assert config.max_batch_size == 4 and config.input[0].dims == [3, 8, 8]


def test_update_config_text_replaces_same_key_and_adds_new_when_cc_model_filenames():
    text = TENSORRT_CONFIG + 'cc_model_filenames { key: "8.6" value: "old.plan" }\n'
    new = update_config_text(text, cc_model_filenames={"8.6": "model_sm86.plan", "9.0": "model_sm90.plan"})
    config = text_format.Parse(new, model_config_pb2.ModelConfig())
    assert dict(config.cc_model_filenames) == {"8.6": "model_sm86.plan", "9.0": "model_sm90.plan"}
    assert "old.plan" not in new


def test_update_config_text_leaves_non_batching_config_alone_when_max_batch_zero():
    text = TENSORRT_CONFIG.replace("max_batch_size: 8", "max_batch_size: 0")
    assert update_config_text(text, max_batch_size=8) == text


def test_defer_plan_copies_external_data_when_onnx_keeps_weights_outside(tmp_path: Path):
    import onnx

    onnx_path = make_image_onnx(tmp_path / "export" / "model.onnx")
    model = onnx.load(str(onnx_path))
    # Only raw-data tensors move out; rewrite the initializers the way exporters store them.
    raw = [onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t), t.name) for t in model.graph.initializer]
    del model.graph.initializer[:]
    model.graph.initializer.extend(raw)
    onnx.save(model, str(onnx_path), save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
    version = tmp_path / "repo" / "m" / "1"
    recipe_path = defer_plan(onnx_path, IMAGE_SIGNATURE, version, CompileSettings())
    assert json.loads(recipe_path.read_text())["extra_files"] == ["weights.bin"]
    assert (version / "weights.bin").read_bytes() == (onnx_path.parent / "weights.bin").read_bytes()
    onnx.checker.check_model(str(version / "model.source.onnx"))


@no_gpu
@pytest.mark.parametrize(
    "builder, missing",
    [("api", "the TensorRT Python package 'tensorrt' is not importable"), ("trtexec", "trtexec is not on PATH")],
)
def test_require_build_environment_names_every_missing_piece_when_builder_chosen(builder: str, missing: str):
    if tensorrt_available() or find_trtexec():
        pytest.skip(reason="TensorRT is installed here")
    with pytest.raises(ToolError) as info:
        require_build_environment(builder)
    message = str(info.value)
    assert "no NVIDIA GPU found" in message and missing in message and "\n" not in message


def test_external_data_files_lists_the_weights_file_when_the_onnx_keeps_weights_outside(tmp_path: Path) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from repo_builder.compile.pending import external_data_files

    w = numpy_helper.from_array(np.ones((4,), dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], initializer=[w])
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "inline.onnx"))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, str(tmp_path / "model.onnx"), save_as_external_data=True, location="weights.bin", size_threshold=0)
    assert external_data_files(tmp_path / "model.onnx") == ("weights.bin",)
    assert external_data_files(tmp_path / "inline.onnx") == ()
