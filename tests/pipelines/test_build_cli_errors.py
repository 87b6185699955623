"""Bad arguments and unreadable inputs end in one line on stderr and exit 2, and write nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.main import main


def run(args: list[str], capsys: Any, *, after_progress: bool = False, exit_code: int = 2) -> str:
    """The error is one line; failures found while exporting follow the progress lines before it."""
    code = main(["build", *args])
    err = capsys.readouterr().err
    assert code == exit_code, err
    assert "Traceback" not in err
    if after_progress:
        lines = err.splitlines()
        assert lines[-1].startswith("error: ") and sum(line.startswith("error") for line in lines) == 1, err
        return lines[-1]
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--max-batch-size", "0"], "--max-batch-size"),
        (["--top-k", "0"], "--top-k"),
        (["--version", "0"], "--version"),
        (["--templates", "/nonexistent/templates"], "--templates"),
        (["--labels", "/nonexistent/labels.txt"], "--labels"),
        (["--runtime", "python", "--defer-compile"], "--defer-compile"),
        (["--name", "../escape"], "--name"),
        (["--from-export", "/nonexistent/export"], "--from-export"),
        (["--runtime", "tensorrt"], "--defer-compile"),  # no GPU here: say how to build on a CPU machine
    ],
)
def test_build_resnet50_prints_one_line_error_when_argument_is_bad(extra: list[str], needle: str, tmp_path: Path, capsys: Any) -> None:
    if extra == ["--runtime", "tensorrt"]:
        from repo_builder.gpu import gpu_present

        if gpu_present():
            pytest.skip(reason="a GPU is present: a TensorRT build is possible here")
    out = tmp_path / "repo"
    # No GPU/TensorRT here is the machine's limit, not a typo: exit 3 (errors.ToolError).
    exit_code = 3 if extra == ["--runtime", "tensorrt"] else 2
    err = run(["resnet50", "--weights", "random", "--out", str(out), *extra], capsys, exit_code=exit_code)
    assert needle in err
    assert not out.exists() or not any(out.iterdir())


def test_build_prints_one_line_error_when_labels_file_is_not_text(tmp_path: Path, capsys: Any) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_bytes(b"\xff\xfe\x00garbage")
    err = run(["resnet50", "--weights", "random", "--out", str(tmp_path / "repo"), "--labels", str(labels)], capsys)
    assert "--labels" in err and "UTF-8" in err


def test_build_prints_one_line_error_when_out_is_an_object_store_url(capsys: Any) -> None:
    assert "local folder" in run(["resnet50", "--weights", "random", "--out", "s3://bucket/repo"], capsys)
    assert not Path("s3:").exists()


def test_build_prints_one_line_error_when_out_is_a_file(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "repo"
    out.write_text("not a folder")
    assert "not a folder" in run(["resnet50", "--weights", "random", "--out", str(out)], capsys)


def test_build_text_classifier_prints_one_line_error_when_model_folder_missing(tmp_path: Path, capsys: Any) -> None:
    assert "--model" in run(["text-classifier", "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "repo")], capsys)


def test_build_text_classifier_prints_one_line_error_when_neither_model_nor_export(tmp_path: Path, capsys: Any) -> None:
    assert "--model" in run(["text-classifier", "--out", str(tmp_path / "repo")], capsys)


def test_build_prints_one_line_error_when_export_signature_is_corrupt(tmp_path: Path, capsys: Any) -> None:
    export = tmp_path / "export"
    export.mkdir()
    (export / "model.onnx").write_bytes(b"\x08\x07")
    (export / "signature.json").write_text("{not json")
    assert "signature" in run(["resnet50", "--from-export", str(export), "--out", str(tmp_path / "repo")], capsys)


@pytest.mark.slow
def test_build_prints_one_line_error_when_weights_file_missing(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "repo"
    assert "--weights" in run(["resnet50", "--weights", str(tmp_path / "missing.pt"), "--out", str(out), "--runtime", "python"], capsys, after_progress=True)
    # The staging folder made for the export is gone: a failed build leaves no trace.
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.slow
def test_build_prints_one_line_error_when_model_folder_is_garbage(tmp_path: Path, capsys: Any) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{ this is not json")
    run(["text-classifier", "--model", str(model), "--out", str(tmp_path / "repo"), "--runtime", "python"], capsys, after_progress=True)
