"""The family registry drives `build`'s subcommands; bad names, versions and labels paths are refused up front."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.build import command as build_group
from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.paths import templates_dir
from repo_builder.pipelines.registry import FAMILIES, family
from repo_builder.pipelines.settings import MAX_VERSION, PipelineSettings


def _one_line_error(args: list[str], capsys: Any) -> str:
    code = main(["build", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_registry_families_are_the_build_subcommands_when_listed() -> None:
    assert set(build_group.commands) == set(FAMILIES) >= {"resnet50", "image-classifier", "text-classifier"}
    for name, record in FAMILIES.items():
        params = {p.name for p in build_group.commands[name].params}
        assert {o.dest for o in record.options} | {"from_export", "out", "fmt", "strict", "gpu", "load_timeout"} <= params
        assert all((templates_dir() / t).is_file() for t in record.templates)


def test_registry_refuses_the_family_when_its_name_is_unknown() -> None:
    with pytest.raises(UserError, match="image-classifier"):
        family("detector")


@pytest.mark.parametrize("value", [0, -3])
def test_pipeline_settings_refuse_max_batch_size_when_below_one(value: int) -> None:
    with pytest.raises(UserError, match="--max-batch-size must be >= 1"):
        PipelineSettings("m", "python", max_batch_size=value)


@pytest.mark.parametrize("name", ["x\n", "x\r\n", " x", "x y", "../x", ".x", "-x", "x" * 201, "x\x00"])
def test_build_refuses_name_when_it_is_not_a_full_match(name: str, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "repo"
    err = _one_line_error(["resnet50", "--weights", "random", "--out", str(out), "--name", name], capsys)
    assert "--name" in err
    assert not out.exists()


def test_build_refuses_version_when_beyond_int64(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "repo"
    err = _one_line_error(["resnet50", "--weights", "random", "--out", str(out), "--version", str(MAX_VERSION + 1)], capsys)
    assert "--version" in err and "int64" in err
    assert not out.exists()


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "labels.fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(("make", "kind"), [(lambda p: p, "is a folder"), (_fifo, "is a FIFO"), (lambda p: Path("/dev/null"), "is a character device")])
def test_build_says_what_labels_path_is_when_not_a_file(make: Any, kind: str, tmp_path: Path, capsys: Any) -> None:
    labels = make(tmp_path)
    err = _one_line_error(["resnet50", "--weights", "random", "--out", str(tmp_path / "repo"), "--labels", str(labels)], capsys)
    assert f"--labels {labels}: {kind}" in err and "no such file" not in err


def test_build_refuses_from_export_when_family_options_also_given(tmp_path: Path, capsys: Any) -> None:
    export = tmp_path / "export"
    export.mkdir()
    err = _one_line_error(
        ["image-classifier", "--model", "torchvision:resnet18", "--from-export", str(export), "--out", str(tmp_path / "repo")], capsys
    )
    assert "drop --model" in err


def test_build_image_classifier_refuses_when_no_model_given(tmp_path: Path, capsys: Any) -> None:
    assert "--model torchvision:NAME" in _one_line_error(["image-classifier", "--out", str(tmp_path / "repo")], capsys)


def test_build_refuses_load_timeout_when_not_live(tmp_path: Path, capsys: Any) -> None:
    err = _one_line_error(["resnet50", "--weights", "random", "--out", str(tmp_path / "r"), "--load-timeout", "5"], capsys)
    assert "--load-timeout" in err


def test_build_refuses_hostile_tensor_name_from_signature_when_building_from_export(tmp_path: Path, capsys: Any) -> None:
    from repo_builder.spec import Signature, TensorSpec, write_signature

    export = tmp_path / "export"
    export.mkdir()
    (export / "model.onnx").write_bytes(b"not read before the names are checked")
    hostile = 'x"""\nimport os; os.system("touch ' + str(tmp_path / "pwned") + '")\n"""'
    preprocess = {"resize": 256, "crop": 224, "mean": [0.5] * 3, "std": [0.5] * 3}
    signature = Signature(
        inputs=(TensorSpec(hostile, "float32", ("batch", 3, 224, 224)),),
        outputs=(TensorSpec("logits", "float32", ("batch", 2)),),
        metadata={"task": "image-classification", "preprocess": preprocess},
    )
    write_signature(signature, export)
    out = tmp_path / "repo"
    err = _one_line_error(["resnet50", "--from-export", str(export), "--runtime", "python", "--out", str(out)], capsys)
    assert "tensor name" in err and "\\n" in err  # shown as a repr, never raw
    assert not (tmp_path / "pwned").exists()
    assert not out.exists() or not any(p.name.endswith(".py") for p in out.rglob("*"))
