"""Python API functions that join layers, as the CLI's commands do (an entry point, like ``cli/``):
``repo_builder.validate(...)`` judges offline, and with ``live=True`` imports ``repo_builder.live`` too.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from repo_builder.errors import UserError
from repo_builder.validate.live_codes import DEFAULT_LOAD_TIMEOUT
from repo_builder.validate.location import validate_location, validate_options
from repo_builder.validate.remote import DEFAULT_MAX_ONNX_BYTES
from repo_builder.validate.report import Report
from repo_builder.validate.rule_config import RuleChoice, resolve_rule_config
from repo_builder.validate.suppress import apply_rule_config


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
    load_timeout: float = DEFAULT_LOAD_TIMEOUT,
    allow_unproven: bool = False,
    s3_endpoint: str | None = None,
    max_download_mb: int = DEFAULT_MAX_ONNX_BYTES >> 20,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    gpus: int | None = None,
    http_header_forward_pattern: str | None = None,
    strict_manifest: bool = False,
) -> Report:
    """Validate a Triton model repository; the Python form of ``repo-builder validate``.

    ``path_or_url``: a folder or ``s3://bucket/prefix``. ``strict``: judge as Triton with
    ``--disable-auto-complete-config``. ``gpu``: whether the deploy target has GPUs (default: it has,
    under ``live`` too: one rule in every command). ``triton_release`` (``"24.08"``): the target
    release for TensorRT version checks (an unknown one is a ``UserError``); ``tensorrt_version``
    (``"10.3.0"``): the TensorRT version itself, which wins over the release's. ``allow_pending``:
    TensorRT plans still to compile are warnings. ``gpus``: the target's GPU count (``gpus: [ids]``
    judged against 0..gpus-1; default unknown).
    ``strict_manifest``: every file changed since the build fails the report (RB002), not only those
    Triton or a step reads.
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
    options = replace(options, strict_manifest=strict_manifest)
    rules = resolve_rule_config(RuleChoice(select=select, ignore=ignore, isolated=True))
    if live:
        # The live machinery (a server launcher, its gRPC client) is imported only when asked for: an offline
        # call must not pay for it (tests/core/test_import_graph.py gives this import's reason).
        from repo_builder.live.location import live_settings, validate_live_location

        settings = live_settings(tritonserver, load_timeout, strict, allow_unproven, s3_endpoint)
        report = validate_live_location(
            path_or_url, options, settings, s3_endpoint=s3_endpoint, max_download_bytes=max_download_mb << 20
        )
    else:
        report = validate_location(path_or_url, options, s3_endpoint=s3_endpoint, max_download_bytes=max_download_mb << 20)
    return apply_rule_config(report, rules)


__all__ = ["validate"]
