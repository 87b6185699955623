"""Repositories for the tensorrt (deferred compile) and onnxruntime runtimes pass the offline validator.

Exports are made once per module and reused with ``--from-export``, so each build is only render + copy.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from repo_builder.cli.main import main
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import ValidateOptions

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from repo_builder.export.resnet50 import export_resnet50
    from repo_builder.export.text_classifier import export_text_classifier
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    root = tmp_path_factory.mktemp("exports")
    export_resnet50(root / "resnet50", weights="random", check_parity=False)
    tiny = make_tiny_text_classifier(root / "tiny", num_labels=4, with_token_type_ids=False)
    export_text_classifier(tiny, root / "text", check_parity=False)
    return {"resnet50": root / "resnet50", "text-classifier": root / "text"}


def build(kind: str, export: Path, out: Path, capsys: Any, *extra: str) -> dict[str, Any]:
    code = main(["build", kind, "--from-export", str(export), "--out", str(out), "--json", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def config(repo: Path, name: str) -> Any:
    return text_format.Parse((repo / name / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())


@pytest.mark.parametrize("kind", ["resnet50", "text-classifier"])
def test_onnxruntime_repository_validates_when_built(kind: str, exports: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    summary = build(kind, exports[kind], tmp_path, capsys, "--runtime", "onnxruntime", "--max-batch-size", "4")
    assert summary["validation"]["ok"] and summary["validation"]["errors"] == 0
    model = next(m["name"] for m in summary["models"] if m["role"] == "model")
    assert config(tmp_path, model).platform == "onnxruntime_onnx"
    assert (tmp_path / model / "1" / "model.onnx").is_file() and not (tmp_path / model / "1" / "model.py").exists()
    # Strict mode (no auto-complete) judges the config alone: it must be complete.
    assert validate_repository(tmp_path, ValidateOptions(strict=True)).ok


@pytest.mark.parametrize("kind", ["resnet50", "text-classifier"])
def test_tensorrt_deferred_repository_validates_with_pending_plans_when_built(kind: str, exports: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    summary = build(kind, exports[kind], tmp_path, capsys, "--runtime", "tensorrt", "--defer-compile")
    assert summary["pending_compile"] and summary["validation"]["ok"]
    model = next(m["name"] for m in summary["models"] if m["role"] == "model")
    cfg = config(tmp_path, model)
    assert cfg.platform == "tensorrt_plan"
    assert model_config_pb2.ModelInstanceGroup.Kind.Name(cfg.instance_group[0].kind) == "KIND_GPU"
    assert (tmp_path / model / "1" / "compile.json").is_file()
    # Without --allow-pending the missing plan is an error: the CPU half of the CI split is not deployable.
    strict = validate_repository(tmp_path, ValidateOptions(gpu_present=True))
    assert not strict.ok and any(d.code == "RB701" for d in strict.diagnostics)
    assert validate_repository(tmp_path, ValidateOptions(gpu_present=True, allow_pending=True)).ok


def test_build_writes_next_version_of_every_step_when_run_twice(exports: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    build("text-classifier", exports["text-classifier"], tmp_path, capsys, "--runtime", "python")
    second = build("text-classifier", exports["text-classifier"], tmp_path, capsys, "--runtime", "python")
    assert {m["version"] for m in second["models"]} == {2}
    assert all((tmp_path / m["name"] / "1").is_dir() for m in second["models"])
    manifest = json.loads((tmp_path / "repo-builder.json").read_text())
    assert sorted(manifest["models"]["text_classifier_model"]["versions"]) == ["1", "2"]


def test_build_refuses_existing_version_without_force_when_version_given(exports: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    build("text-classifier", exports["text-classifier"], tmp_path, capsys, "--runtime", "python", "--version", "3")
    before = (tmp_path / "text_classifier_model" / "3" / "model.py").stat().st_mtime_ns
    code = main(["build", "text-classifier", "--from-export", str(exports["text-classifier"]), "--out", str(tmp_path), "--version", "3", "--runtime", "python"])
    err = capsys.readouterr().err
    assert code == 2 and "--force" in err and err.count("\n") == 1
    assert (tmp_path / "text_classifier_model" / "3" / "model.py").stat().st_mtime_ns == before
    forced = build("text-classifier", exports["text-classifier"], tmp_path, capsys, "--runtime", "python", "--version", "3", "--force", "--top-k", "2", "--replace")
    assert forced["validation"]["ok"]
    assert config(tmp_path, "text_classifier").output[0].dims == [2]


def test_ensemble_folder_keeps_a_placeholder_when_built(exports: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    build("text-classifier", exports["text-classifier"], tmp_path, capsys, "--runtime", "python", "--name", "clf")
    assert [p.name for p in (tmp_path / "clf" / "1").iterdir()] == ["placeholder.txt"]


def test_build_uses_labels_file_when_given(exports: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    labels = tmp_path / "mine.txt"
    labels.write_text("alpha\nbeta\ngamma\ndelta\n")
    build("text-classifier", exports["text-classifier"], tmp_path / "repo", capsys, "--runtime", "python", "--labels", str(labels))
    assert (tmp_path / "repo" / "text_classifier_postprocess" / "1" / "labels.txt").read_text() == labels.read_text()


def test_build_prints_one_line_error_when_labels_do_not_match_classes(exports: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    labels = tmp_path / "short.txt"
    labels.write_text("only\ntwo\n")
    code = main(["build", "text-classifier", "--from-export", str(exports["text-classifier"]), "--out", str(tmp_path / "repo"), "--labels", str(labels)])
    last = capsys.readouterr().err.splitlines()[-1]
    assert code == 2 and last.startswith("error: ") and "2 labels" in last and "4 classes" in last
    repo = tmp_path / "repo"
    assert not repo.exists() or not list(repo.iterdir())  # nothing written, staging (and the new --out) removed
