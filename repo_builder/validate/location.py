"""Validate a repository wherever it lives: a local folder or an ``s3://`` URL, offline. The library behind
``repo-builder validate``; ``--live`` adds its server's verdicts through ``after`` (``repo_builder/live/``
sits above this package: offline validate never imports it).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from pathlib import Path

from repo_builder.nvcf import check_forward_pattern
from repo_builder.store.urls import is_remote
from repo_builder.tensorrt_releases import expected_tensorrt, normalize_release
from repo_builder.validate.analysis.deploy import FLAG_SOURCE, flag_target
from repo_builder.validate.engine import check_repository
from repo_builder.validate.records import Repository, ValidateOptions
from repo_builder.validate.remote import DEFAULT_MAX_ONNX_BYTES, check_remote
from repo_builder.validate.report import Report
from repo_builder.validate.scan import scan_repository

# A further judgment of the offline report while the repository (or its s3:// mirror) is still at hand:
# ``--live``'s server (``repo_builder.live.location``).
After = Callable[[Report], Report]


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


def _judge(repository: Repository, options: ValidateOptions, after: After | None) -> Report:
    with cycle_collector_paused():
        report = check_repository(repository, options)
    return report if after is None else after(report)


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
    platform: str | None = None,
) -> ValidateOptions:
    """The options of ``validate``'s flags: the TensorRT target checked (``check_tensorrt_target``), the
    deploy target's GPUs decided (``target_has_gpu``) and the image Python steps are judged in
    (``--triton-release`` and ``--platform``; without a release the engine takes the manifest's)."""
    triton_release, tensorrt_version = check_tensorrt_target(triton_release, tensorrt_version)
    gpu_present = target_has_gpu(gpu if gpus is None else gpus > 0)
    deploy, skipped = flag_target(triton_release, gpu_present, platform)
    return ValidateOptions(
        strict=strict,
        triton_release=triton_release,
        tensorrt_version=tensorrt_version,
        allow_pending=allow_pending,
        gpu_present=gpu_present,
        gpu_count=gpus,
        http_header_forward_pattern=check_forward_pattern(http_header_forward_pattern),
        deploy=deploy,
        deploy_source=FLAG_SOURCE if deploy is not None else None,
        deploy_skipped=skipped,
        deploy_platform=platform,
    )


def validate_location(
    location: str | Path,
    options: ValidateOptions | None = None,
    *,
    after: After | None = None,
    s3_endpoint: str | None = None,
    max_download_bytes: int = DEFAULT_MAX_ONNX_BYTES,
) -> Report:
    """Scan and judge the repository at ``location`` (a folder, or ``s3://bucket/prefix``) offline.

    ``after``: a further judgment of the report while the repository (or the mirror of an ``s3://`` one)
    still exists; ``repo_builder.live.location.validate_live_location`` passes ``--live``'s server there.
    ``s3_endpoint`` and ``max_download_bytes`` (the largest ONNX file fetched to read its inputs and
    outputs) apply to ``s3://`` locations.
    Raises ``UserError`` for a location that cannot be read.
    """
    options = options or ValidateOptions()
    if is_remote(location):  # an object store URL (store.urls checks the scheme)

        def judge(repository: Repository, _: ValidateOptions | None) -> Report:
            return _judge(repository, options, after)  # inside check_remote: the mirror still exists

        # The store's own problems (an interrupted or truncated publish) join the rules' findings.
        return check_remote(str(location), s3_endpoint, options, max_download_bytes, judge).full_report()
    with cycle_collector_paused():
        repository = scan_repository(location)
    return _judge(repository, options, after)


def target_has_gpu(gpu: bool | None) -> bool:
    """The deploy target's GPUs: as stated (--gpu/--no-gpu), else a GPU server, in every command and under
    ``--live`` too: the verdict must not depend on the machine it runs on (``--live`` proves what this
    machine can load and reports the rest as not proven)."""
    return True if gpu is None else gpu


__all__ = [
    "After",
    "check_tensorrt_target",
    "cycle_collector_paused",
    "target_has_gpu",
    "validate_location",
    "validate_options",
]
