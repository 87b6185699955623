"""analysis/deploy.py and the report: which image Python steps are judged in (--triton-release and
--platform, else repo-builder.json's target, else none), and the report saying so in text and JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.python_env_helpers import pil_step_source, python_step, write_manifest
from support.validate_repo_helpers import codes, make_add_sub

from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.validate.analysis.deploy import deploy_options, flag_target, manifest_target
from repo_builder.validate.location import validate_location, validate_options
from repo_builder.validate.records import ValidateOptions
from repo_builder.validate.reporters import render_report
from repo_builder.validate.reporters.json_report import report_schema


def _options(**flags: Any) -> ValidateOptions:
    base: dict[str, Any] = {"strict": False, "triton_release": None, "tensorrt_version": None, "allow_pending": False,
                            "gpu": None, "live": False}
    return validate_options(**{**base, **flags})


def test_validate_options_resolves_image_when_release_given() -> None:
    options = _options(triton_release="24.05", gpu=False, platform="aarch64")
    deploy = options.deploy
    assert deploy is not None and (deploy.release, deploy.python, deploy.platform, deploy.gpu) == ("24.05", "3.10", "aarch64", False)
    assert options.triton_release == "24.05" and options.deploy_source == "--triton-release"
    assert options.image_text == ("Python steps judged in Triton 24.05 (nvcr.io/nvidia/tritonserver:24.05-py3, Python 3.10, "
                                  "aarch64), CPU-only server")


def test_validate_options_keeps_signature_when_called_without_platform() -> None:
    options = validate_options(strict=True, triton_release=None, tensorrt_version=None, allow_pending=False, gpu=None, live=False)
    assert options.deploy is None and options.deploy_skipped is None and options.strict


def test_validate_options_refuses_platform_when_unknown() -> None:
    with pytest.raises(UserError, match="--platform 'sparc'"):
        _options(triton_release="24.12", platform="sparc")


def test_flag_target_judges_nothing_when_image_table_lacks_release(monkeypatch: pytest.MonkeyPatch) -> None:
    from repo_builder.validate.analysis import deploy

    def unknown(release: str) -> None:
        raise UserError(f"--triton-release {release}: not in the image table")

    monkeypatch.setattr(deploy, "image_row", unknown)
    target, why = flag_target("24.08", True, None)
    assert target is None and why == "--triton-release 24.08: not in the image table"


@pytest.mark.parametrize(("target", "says"), [
    ("24.12", "'target' is not an object"),
    ({"release": 24.12}, "'target.release'"),
    ({"release": "24.12", "platform": "ppc64le"}, "'target.platform'"),
    ({"release": "24.12", "step_packages": "conda"}, "'target.step_packages'"),
    ({"release": "24.12", "step_packages": "dockerfile", "image_provides": ["PIL"]}, "'image_provides'"),
])
def test_manifest_target_says_why_when_target_unusable(target: object, says: str) -> None:
    found = manifest_target({"models": {}, "target": target})
    assert isinstance(found, str) and says in found


def test_manifest_target_reads_provides_only_when_dockerfile() -> None:
    provides = {"PIL": "pillow==13.0.0", "cv2": "opencv-python-headless==4.10.0.84", "google.protobuf": "protobuf==5"}
    found = manifest_target({"models": {}, "target": {"release": "24.12", "step_packages": "dockerfile", "image_provides": provides}})
    assert not isinstance(found, str) and found is not None and found.provides == ("PIL", "cv2", "google")
    shipped = manifest_target({"models": {}, "target": {"release": "24.12", "image_provides": provides}})
    assert not isinstance(shipped, str) and shipped is not None and shipped.provides == ()
    assert manifest_target(None) is None and manifest_target("unreadable") is None and manifest_target({"models": {}}) is None


def test_deploy_options_takes_manifest_release_and_flag_platform_when_no_release_given() -> None:
    data = {"models": {}, "target": {"release": "24.05", "platform": "x86_64", "step_packages": "ship"}}
    options = deploy_options(_options(platform="aarch64", gpu=False), data)
    assert options.deploy is not None and (options.deploy.release, options.deploy.platform, options.deploy.gpu) == ("24.05", "aarch64", False)
    assert options.image_text.endswith("(from repo-builder.json)")


def test_deploy_options_keeps_flag_release_and_manifest_step_packages_when_both_given() -> None:
    data = {"models": {}, "target": {"release": "24.05", "step_packages": "dockerfile", "image_provides": {"PIL": "pillow"}}}
    options = deploy_options(_options(triton_release="24.12"), data)
    assert options.deploy is not None and options.deploy.release == "24.12" and options.deploy.step_packages == "dockerfile"
    assert options.image_provides == ("PIL",) and "Dockerfile installs" in options.image_text


@pytest.mark.parametrize(("data", "says"), [
    (None, "Python steps' imports not judged: no --triton-release"),
    ({"models": {}}, "no --triton-release, and repo-builder.json records no target"),
    ({"models": {}, "target": {"release": "19.01"}}, "repo-builder.json's target.release is not judged"),
    ({"models": {}, "target": []}, "repo-builder.json's target is not usable"),
])
def test_deploy_options_says_why_nothing_is_judged_when_no_image(data: Any, says: str) -> None:
    options = deploy_options(_options(), data)
    assert options.deploy is None and says in options.image_text


def test_report_names_judged_image_in_text_and_json_when_manifest_records_target(repo: Path) -> None:
    python_step(repo, "pre", pil_step_source(names_site_packages=False))
    write_manifest(repo, {"release": "24.12", "gpu": True, "platform": "x86_64", "step_packages": "ship"})
    report = validate_location(repo)
    assert "RB421" in codes(report)
    text = render_report(report, "text").splitlines()
    assert text[1] == ("Python steps judged in Triton 24.12 (nvcr.io/nvidia/tritonserver:24.12-py3, Python 3.12, x86_64), "
                       "GPU server (from repo-builder.json)")
    image = json.loads(render_report(report, "json"))["image"]
    assert image == {"judged": True, "text": text[1], "release": "24.12", "image": "nvcr.io/nvidia/tritonserver:24.12-py3",
                     "python": "3.12", "platform": "x86_64", "gpu": True, "step_packages": "ship"}


@pytest.mark.parametrize("release", [None, "24.12"])
def test_json_report_matches_schema_when_image_judged_or_not(repo: Path, release: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    import jsonschema

    make_add_sub(repo)
    assert main(["validate", str(repo), "--format", "json", *(["--triton-release", release] if release else [])]) == 0
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, report_schema())
    assert document["image"]["judged"] is (release is not None)
    assert document["target"] == "GPU server, all standard backends"  # unchanged: the image has its own field
