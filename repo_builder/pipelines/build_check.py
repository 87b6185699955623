"""After a build: judge the repository exactly as ``repo-builder validate`` would, and say which command that is.

Build prints the validate command it ran, with the same flags, so a CI gate that runs that command gets
the same verdict. The flags follow from the build: a TensorRT repository is judged for the GPU machine it
targets (``--gpu``), and plans deferred with ``--defer-compile`` are expected (``--allow-pending``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.deploy_target import DeployTarget
from repo_builder.errors import UserError
from repo_builder.live.judge import LiveSettings
from repo_builder.live.location import validate_live_location
from repo_builder.pipelines.request_options import CHECK_DEFAULTS, DEFAULT_LOAD_TIMEOUT
from repo_builder.validate.location import target_has_gpu, validate_location
from repo_builder.validate.records import Severity, ValidateOptions
from repo_builder.validate.report import Report
from repo_builder.validate.reporters.formatting import live_json

Log = Callable[[str], None]


@dataclass(frozen=True)
class CheckRequest:
    """Build's validation flags, as the user gave them (None: decided from the build)."""

    # Defaults as declared once in request_options.CHECK_OPTIONS (what --help shows).
    strict: bool = CHECK_DEFAULTS["strict"]
    gpu: bool | None = None  # --gpu/--no-gpu; None: a GPU server, as in every command
    allow_pending: bool = CHECK_DEFAULTS["allow_pending"]
    live: bool = CHECK_DEFAULTS["live"]
    tritonserver: Path | None = CHECK_DEFAULTS["tritonserver"]
    load_timeout: float = CHECK_DEFAULTS["load_timeout"]
    allow_unproven: bool = CHECK_DEFAULTS["allow_unproven"]  # --live: models the embedded server cannot load here do not fail the build
    # The target server's --http-header-forward-pattern: 'NVCF-.*' for a build --nvcf-assets (its step reads
    # NVCF's headers), so the gate build prints judges the repository for the server that forwards them.
    http_header_forward_pattern: str | None = None

    def __post_init__(self) -> None:
        if not self.load_timeout > 0:
            raise UserError(f"--load-timeout must be positive, got {self.load_timeout}")
        if not self.live and (self.tritonserver is not None or self.load_timeout != DEFAULT_LOAD_TIMEOUT or self.allow_unproven):
            raise UserError("--tritonserver, --load-timeout and --allow-unproven only apply with --live")


@dataclass(frozen=True)
class CheckRun:
    """The validation build runs: its options and the exact command that repeats it."""

    repository: Path
    options: ValidateOptions
    request: CheckRequest

    @property
    def argv(self) -> list[str]:
        args = ["repo-builder", "validate", str(self.repository)]
        args += ["--strict"] if self.options.strict else []
        args += ["--allow-pending"] if self.options.allow_pending else []
        args += ["--gpu" if self.options.gpu_present else "--no-gpu"]  # explicit: never a machine-dependent default
        deploy = self.options.deploy
        if deploy is not None:  # the image the build targeted: its imports and Python judged by the gate too
            args += ["--triton-release", deploy.release]
            args += ["--platform", deploy.platform] if deploy.platform != "x86_64" else []
        pattern = self.options.http_header_forward_pattern
        args += ["--http-header-forward-pattern", pattern] if pattern else []
        if self.request.live:
            args += ["--live"]
            args += ["--tritonserver", str(self.request.tritonserver)] if self.request.tritonserver else []
            if self.request.load_timeout != DEFAULT_LOAD_TIMEOUT:
                args += ["--load-timeout", f"{self.request.load_timeout:g}"]
            args += ["--allow-unproven"] if self.request.allow_unproven else []
        return args

    @property
    def command(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class CheckOutcome:
    ok: bool
    errors: int
    warnings: int
    command: str
    lines: tuple[str, ...] = ()
    live: dict[str, dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ok": self.ok, "errors": self.errors, "warnings": self.warnings,
                                "command": self.command, "diagnostics": list(self.lines)}
        if self.live is not None:
            data["live"] = self.live
        return data


def choose_check(repository: Path, runtime: str, pending_compile: bool, request: CheckRequest,
                 target: DeployTarget | None = None) -> CheckRun:
    """Which validation matches this build (pure, apart from asking for a GPU when nothing decides it)."""
    # A TensorRT repository targets a GPU machine; otherwise validate's own default (printed explicitly).
    gpu = target_has_gpu(request.gpu)  # one rule in every command: a GPU server unless --no-gpu
    if pending_compile and not gpu:
        raise UserError("--defer-compile targets a GPU machine; drop --no-gpu (plans are compiled and run there)")
    options = ValidateOptions(strict=request.strict, allow_pending=request.allow_pending or pending_compile, gpu_present=gpu,
                              triton_release=target.release if target is not None else None, deploy=target,
                              http_header_forward_pattern=request.http_header_forward_pattern)
    return CheckRun(Path(repository), options, request)


def rehearsal_options(runtime: str, pending_compile: bool) -> ValidateOptions:
    """What the build's writer judges each rehearsed state with (``repository/judge.py``, a layer below,
    takes them): the options of the check after the build with no validation flags given."""
    return choose_check(Path("."), runtime, pending_compile, CheckRequest()).options


def run_check(check: CheckRun, *, log: Log) -> CheckOutcome:
    """Validate offline, then with ``live`` on the embedded Triton; log the diagnostics and the verdict."""
    live = _live_settings(check) if check.request.live else None
    if live is not None:
        log("live: loading every model into the embedded Triton and sending one request per ensemble")
    # The library call behind `repo-builder validate`: the printed command gives this same verdict. Under
    # --live, ``log`` gets validate's own progress: a line as each load starts and one with its verdict.
    if live is None:
        report = validate_location(check.repository, check.options)
    else:
        report = validate_live_location(check.repository, check.options, live, progress=log)
    live_results = _live_results(report) if live is not None else None
    lines = tuple(
        f"{d.severity.value} {d.code} {d.path}: {d.message}" + (f" (hint: {d.hint})" if d.hint else "")
        for d in report.diagnostics
    )
    for line in lines:
        log(f"  {line}")
    errors, warnings = report.count(Severity.ERROR), report.count(Severity.WARNING)
    ok = report.exit_code(Severity.ERROR) == 0
    verdict = "passes" if ok else "FAILS"
    log(f"validate: {check.repository} {verdict} ({len(report.models)} models, {errors} errors, {warnings} warnings)")
    return CheckOutcome(ok, errors, warnings, check.command, lines, live_results)


def _live_settings(check: CheckRun) -> LiveSettings:
    tritonserver = str(check.request.tritonserver) if check.request.tritonserver else None
    return LiveSettings(tritonserver=tritonserver, load_timeout=check.request.load_timeout, strict=check.options.strict,
                        allow_unproven=check.request.allow_unproven)


def _live_results(report: Report) -> dict[str, dict[str, Any]]:
    """Each model's live result for build's JSON summary, with the report's own wording of its status."""
    return {
        m.name: {**(live_json(m) or {}), "status_text": m.live.verdict_text}
        for m in report.models
        if m.live is not None
    }
