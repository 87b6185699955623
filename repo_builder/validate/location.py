"""Validate a repository wherever it lives: a local folder or an ``s3://`` URL, offline, and optionally
on a real tritonserver (``--live``). The library behind ``repo-builder validate`` and ``repo_builder.validate``.
"""

from __future__ import annotations

import contextlib
import gc
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from repo_builder.errors import UserError
from repo_builder.nvcf import check_forward_pattern
from repo_builder.store.urls import is_remote
from repo_builder.tensorrt_releases import expected_tensorrt, normalize_release
from repo_builder.validate.engine import check_repository
from repo_builder.validate.live import LiveSettings, Progress, validate_live
from repo_builder.validate.live_request import InputFile
from repo_builder.validate.records import Repository, ValidateOptions
from repo_builder.validate.remote import DEFAULT_MAX_ONNX_BYTES, check_remote
from repo_builder.validate.report import Report
from repo_builder.validate.rule_config import RuleChoice, resolve_rule_config
from repo_builder.validate.scan import scan_repository
from repo_builder.validate.suppress import apply_rule_config


def gpu_on_this_machine() -> bool:
    """Cheap guess whether KIND_GPU instances can load here: an NVIDIA driver tool on PATH."""
    return shutil.which("nvidia-smi") is not None


@contextlib.contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while scanning and judging.

    A scan and the rules build tens of thousands of small objects and hardly any reference cycles (the
    ensemble graphs, freed at the next collection): the collector's passes over a 1,000-model
    repository find nothing and cost about 5% of the run.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def live_target(options: ValidateOptions, live: LiveSettings) -> str:
    """Under ``--live`` the report's target says both: the deploy target judged, and the machine that proved it."""
    gpus = "with GPUs" if gpu_on_this_machine() else "without GPUs"
    server = live.tritonserver or "the embedded tritonserver"
    return f"{options.target}; live on this machine ({gpus}) with {server}"


def _judge(repository: Repository, options: ValidateOptions, live: LiveSettings | None, progress: Progress | None) -> Report:
    with cycle_collector_paused():
        report = check_repository(repository, options)
    if live is None:
        return report
    return replace(validate_live(report, live, progress), target=live_target(options, live))


def check_tensorrt_target(triton_release: str | None, tensorrt_version: str | None) -> tuple[str | None, str | None]:
    """``--triton-release`` and ``--tensorrt-version`` checked before anything is read: a malformed or
    unknown release is a usage error listing the known ones (``--tensorrt-version`` is the override for
    a release the table does not know). Returns them normalized (``24.8`` -> ``24.08``)."""
    release = normalize_release(triton_release) if triton_release is not None else None
    expected_tensorrt(release, tensorrt_version)  # raises UserError for a bad version or unknown release
    return release, tensorrt_version.strip() if tensorrt_version is not None else None


def validate_options(
    *,
    strict: bool,
    triton_release: str | None,
    tensorrt_version: str | None,
    allow_pending: bool,
    gpu: bool | None,
    live: bool,
    gpus: int | None = None,
    http_header_forward_pattern: str | None = None,
) -> ValidateOptions:
    """The options of ``validate``'s flags: the TensorRT target checked (``check_tensorrt_target``) and
    the deploy target's GPUs decided (``target_has_gpu``)."""
    triton_release, tensorrt_version = check_tensorrt_target(triton_release, tensorrt_version)
    return ValidateOptions(
        strict=strict,
        triton_release=triton_release,
        tensorrt_version=tensorrt_version,
        allow_pending=allow_pending,
        gpu_present=target_has_gpu(gpu if gpus is None else gpus > 0),
        gpu_count=gpus,
        http_header_forward_pattern=check_forward_pattern(http_header_forward_pattern),
    )


def live_settings(
    tritonserver: str | None,
    load_timeout: float,
    strict: bool,
    allow_unproven: bool,
    s3_endpoint: str | None,
    inputs: tuple[InputFile, ...] = (),
) -> LiveSettings:
    """``--live``'s settings from ``validate``'s flags (the server runs ``--strict`` when the rules do)."""
    return LiveSettings(
        tritonserver=tritonserver,
        load_timeout=load_timeout,
        strict=strict,
        allow_unproven=allow_unproven,
        s3_endpoint=s3_endpoint,
        inputs=inputs,
    )


def validate_location(
    location: str | Path,
    options: ValidateOptions | None = None,
    *,
    live: LiveSettings | None = None,
    s3_endpoint: str | None = None,
    max_download_bytes: int = DEFAULT_MAX_ONNX_BYTES,
    progress: Progress | None = None,
) -> Report:
    """Scan and judge the repository at ``location`` (a folder, or ``s3://bucket/prefix``).

    ``live``: also load every model into a real tritonserver (an ``s3://`` repository is read by the
    server itself); ``progress`` then gets plain lines: one as each model's load starts, one with its
    verdict. ``s3_endpoint`` and ``max_download_bytes`` (the largest ONNX file fetched to read its inputs
    and outputs) apply to ``s3://`` locations.
    Raises ``UserError`` for a location that cannot be read.
    """
    options = options or ValidateOptions()
    if is_remote(location):  # an object store URL (store.urls checks the scheme)

        def judge(repository: Repository, _: ValidateOptions | None) -> Report:
            return _judge(repository, options, live, progress)  # inside check_remote: the mirror still exists

        # The store's own problems (an interrupted or truncated publish) join the rules' findings.
        return check_remote(str(location), s3_endpoint, options, max_download_bytes, judge).full_report()
    with cycle_collector_paused():
        repository = scan_repository(location)
    return _judge(repository, options, live, progress)


def validate(
    path_or_url: str | Path,
    *,
    strict: bool = False,
    gpu: bool | None = None,
    triton_release: str | None = None,
    tensorrt_version: str | None = None,
    allow_pending: bool = False,
    live: bool = False,
    tritonserver: str | None = None,
    load_timeout: float = 60.0,
    allow_unproven: bool = False,
    s3_endpoint: str | None = None,
    max_download_mb: int = DEFAULT_MAX_ONNX_BYTES >> 20,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    gpus: int | None = None,
    http_header_forward_pattern: str | None = None,
) -> Report:
    """Validate a Triton model repository; the Python form of ``repo-builder validate``.

    ``path_or_url``: a folder or ``s3://bucket/prefix``. ``strict``: judge as Triton with
    ``--disable-auto-complete-config``. ``gpu``: whether the deploy target has GPUs (default: it has,
    under ``live`` too: one rule in every command). ``triton_release`` (``"24.08"``): the target
    release for TensorRT version checks (an unknown one is a ``UserError``); ``tensorrt_version``
    (``"10.3.0"``): the TensorRT version itself, which wins over the release's. ``allow_pending``:
    TensorRT plans still to compile are warnings. ``gpus``: the target's GPU count (``gpus: [ids]``
    judged against 0..gpus-1; default unknown).
    ``http_header_forward_pattern``: the target server's (NVCF: ``"NVCF-.*"``); a step reading NVCF assets
    warns (RB801) when it does not forward their headers.
    ``live``: also load every model in a real tritonserver (``tritonserver``: its binary; ``load_timeout``
    seconds per model; ``allow_unproven``: models it cannot load here do not fail the report).
    ``select`` / ``ignore``: rule codes, prefixes or names as on the command line (``"RB401:reason"``);
    configuration files are not read here. Inline ``# repo-builder: ignore[...]`` comments always apply.
    Returns the ``Report``; ``report.ok`` and ``report.exit_code()`` give the verdict.
    Raises ``repo_builder.errors.UserError`` for bad input and ``ToolError`` when a tool fails.
    """
    if load_timeout <= 0:
        raise UserError("load_timeout must be positive")
    if max_download_mb < 0:
        raise UserError("max_download_mb must be >= 0")
    if gpus is not None and (gpus < 0 or (gpu is not None and gpu != (gpus > 0))):
        raise UserError(f"gpus={gpus}: give a count >= 0 that agrees with gpu={gpu}")
    options = validate_options(
        strict=strict,
        triton_release=triton_release,
        tensorrt_version=tensorrt_version,
        allow_pending=allow_pending,
        gpu=gpu,
        live=live,
        gpus=gpus,
        http_header_forward_pattern=http_header_forward_pattern,
    )
    settings = live_settings(tritonserver, load_timeout, strict, allow_unproven, s3_endpoint) if live else None
    rules = resolve_rule_config(RuleChoice(select=select, ignore=ignore, isolated=True))
    report = validate_location(
        path_or_url, options, live=settings, s3_endpoint=s3_endpoint, max_download_bytes=max_download_mb << 20
    )
    return apply_rule_config(report, rules)


def target_has_gpu(gpu: bool | None) -> bool:
    """The deploy target's GPUs: as stated (--gpu/--no-gpu), else a GPU server, in every command and under
    ``--live`` too: the verdict must not depend on the machine it runs on (``--live`` proves what this
    machine can load and reports the rest as not proven)."""
    return True if gpu is None else gpu


__all__ = [
    "check_tensorrt_target",
    "cycle_collector_paused",
    "gpu_on_this_machine",
    "live_settings",
    "validate",
    "validate_location",
    "validate_options",
]
