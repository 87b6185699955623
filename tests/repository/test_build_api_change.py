"""Issue 26: build never changes by accident the API clients call, and never writes into an unrelated folder.

The end-to-end tests build the tiny text classifier, then an image classifier with the same --name over it:
refused with the changed tensors named and nothing changed; with --replace it goes through. A rebuild with
the same signature adds version 2 as before.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from repo_builder.cli.main import main
from repo_builder.errors import RefusedError, UserError
from repo_builder.render.rendered import RenderedModel
from repo_builder.repository.build_target import api_changes, check_api_unchanged, check_out_folder

TEXT_API = """name: "clf" platform: "ensemble" max_batch_size: 8
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ 3 ] } ]
"""
IMAGE_API = TEXT_API.replace('"TEXT"', '"IMAGE"').replace("dims: [ 3 ]", "dims: [ 5 ]")


def parsed(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_api_changes_names_each_changed_tensor_when_the_signature_differs() -> None:
    changes = api_changes(parsed(TEXT_API), parsed(IMAGE_API))
    assert changes == [
        "new input IMAGE TYPE_STRING [-1, 1]",
        "input TEXT TYPE_STRING [-1, 1] removed",
        "output SCORES TYPE_FP32 [-1, 3] -> TYPE_FP32 [-1, 5]",
    ]
    assert api_changes(parsed(TEXT_API), parsed(TEXT_API + "# retrained\n")) == []


def test_check_api_unchanged_refuses_unless_replace_when_the_ensemble_exists(tmp_path: Path) -> None:
    (tmp_path / "clf").mkdir()
    (tmp_path / "clf" / "config.pbtxt").write_text(TEXT_API)
    new = [RenderedModel("clf", "ensemble", 2, IMAGE_API)]
    with pytest.raises(RefusedError, match=r"change the API clients call on 'clf': new input IMAGE.*--replace"):
        check_api_unchanged(tmp_path, new, replace=False)
    check_api_unchanged(tmp_path, new, replace=True)
    check_api_unchanged(tmp_path, [RenderedModel("other", "ensemble", 1, IMAGE_API)], replace=False)  # new name


def test_check_out_folder_refuses_when_the_folder_holds_only_the_users_own_files(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "photos").mkdir()
    with pytest.raises(UserError, match=r"not empty and holds no model repository \(notes/, photos/\)"):
        check_out_folder(tmp_path)


@pytest.mark.parametrize("layout", ["empty", "manifest", "model", "missing"])
def test_check_out_folder_accepts_when_empty_missing_or_a_repository(tmp_path: Path, layout: str) -> None:
    out = tmp_path / "out"
    if layout != "missing":
        out.mkdir()
    if layout == "manifest":
        (out / "repo-builder.json").write_text("{}")
    if layout == "model":
        (out / "m" / "1").mkdir(parents=True)
        (out / "notes.txt").write_text("mine")
    check_out_folder(out)


def test_build_refuses_an_unrelated_folder_before_any_export_when_out_is_not_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import repo_builder.pipelines.build_request as build_request

    def no_export(*args: object, **kwargs: object) -> None:
        raise AssertionError("exported before refusing --out")

    monkeypatch.setattr(build_request, "prepare_family", no_export)
    out = tmp_path / "home"
    (out / "notes").mkdir(parents=True)
    (out / "photos").mkdir()
    (out / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    before = snapshot(out)
    assert main(["build", "resnet50", "--weights", "random", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "holds no model repository (notes/, photos/)" in errors[0]
    assert snapshot(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["home"]


pytest.importorskip("transformers", reason="the export extra builds the tiny text classifier")


@pytest.fixture(scope="module")
def text_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    return make_tiny_text_classifier(tmp_path_factory.mktemp("tiny-bert"), num_labels=3, seed=0)


def build_text(text_model: Path, out: Path, *extra: str) -> int:
    return main(["build", "text-classifier", "--model", str(text_model), "--runtime", "python", "--out", str(out),
                 "--skip-parity", "--name", "text_classifier", "-q", *extra])


def build_image(out: Path, *extra: str) -> int:
    return main(["build", "image-classifier", "--model", "torchvision:mobilenet_v3_small", "--weights", "random",
                 "--runtime", "python", "--out", str(out), "--skip-parity", "--name", "text_classifier", "-q", *extra])


def test_build_refuses_and_changes_nothing_when_an_image_classifier_would_replace_a_text_api(
    text_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "repo"
    assert build_text(text_model, out) == 0
    capsys.readouterr()
    before = snapshot(out)
    assert build_image(out) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and "change the API clients call on 'text_classifier'" in err[0]
    assert "new input IMAGE" in err[0] and "input TEXT TYPE_STRING [-1, 1] removed" in err[0] and "--replace" in err[0]
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]  # no stage or lock left beside it

    assert build_image(out, "--replace") == 0
    config = parsed((out / "text_classifier" / "config.pbtxt").read_text())
    assert [t.name for t in config.input] == ["IMAGE"]


def test_build_adds_version_2_when_the_signature_is_unchanged(text_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "repo"
    assert build_text(text_model, out) == 0
    assert build_text(text_model, out) == 0  # retrain, rebuild: a new version, no --replace needed
    capsys.readouterr()
    assert sorted(p.name for p in (out / "text_classifier_model").iterdir() if p.is_dir()) == ["1", "2"]
