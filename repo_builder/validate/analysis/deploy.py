"""Which image Python steps are judged in: ``--triton-release`` (and ``--platform``), else the target the
repository's ``repo-builder.json`` records, else none, and the report says so.

The manifest is repository data, read like any (``analysis/manifest.py``); its ``target`` is checked field
by field, and one that is not usable judges nothing rather than guess. How a step gets packages the image
lacks (``step_packages``: shipped, or installed by the repository's Dockerfile, with ``image_provides``)
is the repository's own fact: it comes from the manifest whichever release is judged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from repo_builder.deploy_target import PLATFORMS, STEP_PACKAGES, DeployTarget, resolve_target
from repo_builder.errors import UserError
from repo_builder.triton_images import image_row
from repo_builder.validate.analysis.image_modules import module_names
from repo_builder.validate.records import MANIFEST_SOURCE, ValidateOptions

FLAG_SOURCE = "--triton-release"
MAX_PROVIDED = 10_000  # image_provides entries read (a Dockerfile installs tens)


@dataclass(frozen=True)
class ManifestTarget:
    release: str
    platform: str | None
    step_packages: str
    provides: tuple[str, ...]  # top-level modules the Dockerfile installs (step_packages "dockerfile" only)


def check_platform(platform: str | None) -> None:
    if platform is not None and platform not in PLATFORMS:
        raise UserError(f"--platform '{platform}': expected one of {', '.join(PLATFORMS)}")


def flag_target(release: str | None, gpu: bool, platform: str | None) -> tuple[DeployTarget | None, str | None]:
    """The target of ``--triton-release``/``--platform`` and, when there is none, why (None: not given,
    the manifest may decide). A release the image table lacks judges no image (its TensorRT checks still
    run): the reason says which releases it knows."""
    check_platform(platform)
    if release is None:
        return None, None
    try:
        image_row(release)
    except UserError as exc:
        return None, str(exc)
    return resolve_target(release, gpu, platform), None


def _provides(value: Any) -> tuple[str, ...] | str:
    if value is None:
        return ()
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return "'image_provides' is not an object of module names"
    return module_names(list(value)[:MAX_PROVIDED])


def manifest_target(data: dict[str, Any] | str | None) -> ManifestTarget | str | None:
    """The manifest's ``target``, a one-line reason it is not usable, or None when there is none (no
    manifest, an unreadable one: RB005 reports that)."""
    if not isinstance(data, dict) or "target" not in data:
        return None
    target = data["target"]
    if not isinstance(target, dict):
        return "'target' is not an object"
    release, platform = target.get("release"), target.get("platform")
    step_packages = target.get("step_packages") or "ship"
    if not isinstance(release, str) or not release.strip():
        return "'target.release' is not a release such as \"24.12\""
    if platform is not None and platform not in PLATFORMS:
        return f"'target.platform' is not one of {', '.join(PLATFORMS)}"
    if step_packages not in STEP_PACKAGES:
        return f"'target.step_packages' is not one of {', '.join(STEP_PACKAGES)}"
    provides = _provides(target.get("image_provides")) if step_packages == "dockerfile" else ()
    if isinstance(provides, str):
        return provides
    return ManifestTarget(release.strip(), platform, step_packages, provides)


def _not_judged(options: ValidateOptions, why: str) -> ValidateOptions:
    return replace(options, deploy=None, deploy_skipped=why)


def deploy_options(options: ValidateOptions, data: dict[str, Any] | str | None) -> ValidateOptions:
    """``options`` with the image to judge decided, given the repository's manifest ``data``."""
    recorded = manifest_target(data)
    deploy = options.deploy
    if deploy is None and options.deploy_skipped is not None:
        return options  # --triton-release named a release the image table lacks: nothing to judge
    if isinstance(recorded, str):
        if deploy is None:
            return _not_judged(options, f"no --triton-release, and repo-builder.json's target is not usable: {recorded}")
        return options
    if deploy is None:
        if recorded is None:
            why = "no --triton-release" + (", and repo-builder.json records no target" if isinstance(data, dict) else "")
            return _not_judged(options, why)
        try:
            deploy = resolve_target(recorded.release, options.gpu_present, options.deploy_platform or recorded.platform)
        except UserError as exc:
            return _not_judged(options, f"no --triton-release, and repo-builder.json's target.release is not judged: {exc}")
        options = replace(options, deploy_source=MANIFEST_SOURCE)
    if recorded is not None and recorded.step_packages != deploy.step_packages:
        deploy = replace(deploy, step_packages=recorded.step_packages)
    provides = recorded.provides if recorded is not None else options.image_provides
    return replace(options, deploy=deploy, image_provides=provides)
