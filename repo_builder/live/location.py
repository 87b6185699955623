"""``validate --live`` wherever the repository lives: the offline judgment (``validate_location``) followed,
while the repository or its ``s3://`` mirror is at hand, by the real server's (``judge.validate_live``)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from repo_builder.deploy_target import DeployTarget
from repo_builder.live.judge import LiveSettings, Progress, validate_live
from repo_builder.live.request import parse_input_file
from repo_builder.repository.manifest import read_manifest
from repo_builder.store.urls import is_remote
from repo_builder.validate.location import validate_location
from repo_builder.validate.records import ValidateOptions
from repo_builder.validate.remote import DEFAULT_MAX_ONNX_BYTES
from repo_builder.validate.report import Report


def gpu_on_this_machine() -> bool:
    """Cheap guess whether KIND_GPU instances can load here: an NVIDIA driver tool on PATH."""
    return shutil.which("nvidia-smi") is not None


def live_target(options: ValidateOptions, live: LiveSettings) -> str:
    """Under ``--live`` the report's target says both: the deploy target judged, and the machine that proved it."""
    gpus = "with GPUs" if gpu_on_this_machine() else "without GPUs"
    server = live.tritonserver or "the embedded tritonserver"
    on_image = live.deploy is not None and live.on_image_python
    python = f", Python steps on {live.deploy.image_name}'s Python {live.deploy.python} and its packages" if live.deploy and on_image else ""
    return f"{options.target}; live on this machine ({gpus}) with {server}{python}"


def dockerfile_packages(location: str | Path, deploy: DeployTarget) -> tuple[tuple[str, str], ...]:
    """With ``--step-packages dockerfile`` the image is built from the stock one plus the pins the manifest
    records: the live proof's environment holds them too (a local repository's manifest; none for s3://)."""
    if deploy.step_packages != "dockerfile" or is_remote(location):
        return ()
    provides = read_manifest(Path(location)).get("target", {}).get("image_provides", {})
    pins = {str(pin) for pin in provides.values()} if isinstance(provides, dict) else set()
    return tuple((name, f"=={version}") for name, _, version in (pin.partition("==") for pin in sorted(pins)))


def live_settings(
    tritonserver: str | None,
    load_timeout: float,
    strict: bool,
    allow_unproven: bool,
    s3_endpoint: str | None,
    inputs: tuple[str, ...] = (),
) -> LiveSettings:
    """``--live``'s settings from ``validate``'s flags (the server runs ``--strict`` when the rules do);
    ``inputs``: the ``--input [MODEL:]NAME=FILE`` values, checked here (a missing file is a ``UserError``)."""
    return LiveSettings(
        tritonserver=tritonserver,
        load_timeout=load_timeout,
        strict=strict,
        allow_unproven=allow_unproven,
        s3_endpoint=s3_endpoint,
        inputs=tuple(parse_input_file(v) for v in inputs),
    )


def validate_live_location(
    location: str | Path,
    options: ValidateOptions | None,
    live: LiveSettings,
    *,
    s3_endpoint: str | None = None,
    max_download_bytes: int = DEFAULT_MAX_ONNX_BYTES,
    progress: Progress | None = None,
) -> Report:
    """``validate_location``, then every model loaded into a real tritonserver (an ``s3://`` repository is
    read by the server itself). ``progress`` gets plain lines: one as each model's load starts, one with
    its verdict."""
    options = options or ValidateOptions()

    def prove(report: Report) -> Report:
        settings = live
        if settings.deploy is None and report.deploy is not None:  # the image judged offline is the one proven live
            settings = replace(live, deploy=report.deploy, image_packages=dockerfile_packages(location, report.deploy))
        return replace(validate_live(report, settings, progress), target=live_target(options, settings))

    return validate_location(
        location, options, after=prove, s3_endpoint=s3_endpoint, max_download_bytes=max_download_bytes
    )


__all__ = ["gpu_on_this_machine", "live_settings", "live_target", "validate_live_location"]
