"""build --nvcf-assets: options checked before anything is exported, and what the build writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.nvcf import DEFAULT_ROOT, NvcfAssets, forwards_headers
from repo_builder.pipelines.nvcf_assets import nvcf_settings
from repo_builder.pipelines.registry import FAMILIES


def test_nvcf_settings_are_none_when_flag_absent() -> None:
    assert nvcf_settings({}, "resnet50", FAMILIES["resnet50"].options) is None


def test_nvcf_settings_default_to_nvcf_root_when_flag_given() -> None:
    settings = nvcf_settings({"nvcf_assets": True}, "resnet50", FAMILIES["resnet50"].options)
    assert settings == NvcfAssets(DEFAULT_ROOT) and settings.parameters("IMAGE")["nvcf_asset_input"] == "IMAGE_ASSET"


def test_nvcf_settings_refused_when_family_takes_no_file() -> None:
    with pytest.raises(UserError, match="text-classifier family takes no file input"):
        nvcf_settings({"nvcf_assets": True}, "text-classifier", FAMILIES["text-classifier"].options)


@pytest.mark.parametrize(("root", "message"), [("relative/dir", "absolute"), ("/a/../b", r"no '\.\.'"), ("/", r"not '/'")])
def test_nvcf_assets_refused_when_root_is_not_a_plain_absolute_folder(root: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        NvcfAssets(root)


@pytest.mark.parametrize("argv", [
    ["--asset-root", "/srv/assets"],  # tuning without the flag
    ["--nvcf-assets", "--asset-root", "relative"],
    ["--nvcf-assets", "--max-asset-bytes", "0"],
    ["--nvcf-assets", "--max-assets", "0"],
])
def test_build_exits_2_before_export_when_nvcf_options_are_wrong(tmp_path: Path, argv: list[str], capsys: Any) -> None:
    out = tmp_path / "repo"
    assert main(["build", "resnet50", "--weights", "random", "--runtime", "python", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and ("--nvcf-assets" in err or "--max-asset" in err or "--asset-root" in err), err
    assert not out.exists()  # refused before anything was staged or written


def test_build_text_classifier_has_no_nvcf_option(tmp_path: Path) -> None:
    assert main(["build", "text-classifier", "--model", "x", "--out", str(tmp_path / "r"), "--nvcf-assets"]) == 2


@pytest.mark.parametrize(("pattern", "missing"), [(None, 2), ("NVCF-.*", 0), ("nvcf", 0), ("NVCF-ASSET-DIR", 1), ("X-.*", 2)])
def test_forwards_headers_matches_like_triton_when_pattern_given(pattern: str | None, missing: int) -> None:
    """Partial and case-insensitive, as measured on tritonserver 2.51 (tests/nvcf/test_nvcf_assets_triton.py)."""
    assert len(forwards_headers(pattern)) == missing


def test_built_configs_declare_optional_inputs_and_asset_parameters(asset_repository: Any) -> None:
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    def config(name: str) -> Any:
        parsed = model_config_pb2.ModelConfig()
        text_format.Parse((asset_repository.repo / name / "config.pbtxt").read_text(), parsed)
        return parsed

    ensemble, pre = config("resnet50"), config("resnet50_preprocess")
    for model in (ensemble, pre):
        assert [(i.name, i.optional) for i in model.input] == [("IMAGE", True), ("IMAGE_ASSET", True)]
    assert dict(ensemble.ensemble_scheduling.step[0].input_map) == {"IMAGE": "IMAGE", "IMAGE_ASSET": "IMAGE_ASSET"}
    assert pre.parameters["nvcf_asset_root"].string_value == str(asset_repository.root)
    assert pre.parameters["nvcf_max_assets"].string_value == "4"
    source = next((asset_repository.repo / "resnet50_preprocess").glob("*/model.py")).read_text()
    assert "repo_builder" not in source and "class AssetReader" in source


def test_image_preprocess_template_unchanged_when_built_without_assets() -> None:
    """The decode path a request with IMAGE takes renders without any asset code when --nvcf-assets is off."""
    from repo_builder.render import context as ctx
    from repo_builder.render.environment import make_environment
    from repo_builder.spec import TensorSpec

    spec = TensorSpec("input", "float32", ("batch", 3, 224, 224))
    transforms = {"resize": 256, "crop": [224, 224], "mean": [0.5] * 3, "std": [0.5] * 3, "interpolation": "bilinear"}
    pre = ctx.image_preprocess_context("p", "m", spec, transforms, draft_margin=2, origin="x")
    template = make_environment().get_template("model/image_preprocess.py.j2")
    plain, explicit_off, on = template.render(**pre), template.render(**pre, nvcf=False), template.render(**pre, nvcf=True)
    assert plain == explicit_off
    assert "AssetReader" not in plain and "nvcf" not in plain.lower()
    compile(on, "model.py", "exec")
    assert "self.assets.images(request)" in on and "errors.update(refused)" in on


@pytest.mark.slow
def test_build_image_classifier_takes_assets_when_built_from_export(tmp_path: Path) -> None:
    """The other image family, and --from-export with --nvcf-assets (the options do not conflict)."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    assert main(["export", "image-classifier", "--model", "torchvision:squeezenet1_1", "--weights", "random",
                 "--out", str(tmp_path / "export"), "--no-parity"]) == 0
    assert main(["build", "image-classifier", "--from-export", str(tmp_path / "export"), "--runtime", "python", "-q",
                 "--out", str(tmp_path / "repo"), "--nvcf-assets", "--asset-root", "/srv/assets"]) == 0
    parsed = model_config_pb2.ModelConfig()
    text_format.Parse((tmp_path / "repo" / "image_classifier" / "config.pbtxt").read_text(), parsed)
    assert [(i.name, i.optional) for i in parsed.input] == [("IMAGE", True), ("IMAGE_ASSET", True)]
    pre = (tmp_path / "repo" / "image_classifier_preprocess" / "config.pbtxt").read_text()
    assert 'string_value: "/srv/assets"' in pre
