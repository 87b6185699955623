"""``repo-builder validate PATH``: what Triton will refuse in a model repository, before deploy."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from repo_builder.errors import UserError

if TYPE_CHECKING:
    from repo_builder.validate.records import Repository
    from repo_builder.validate.report import Report

FORMATS = ("text", "json", "github", "junit")


def detect_gpu() -> bool:
    """Cheap guess whether KIND_GPU instances can load here: an NVIDIA driver tool on PATH."""
    import shutil

    return shutil.which("nvidia-smi") is not None


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    import tempfile

    folder = path.parent
    if not folder.is_dir():
        raise UserError(f"--output {path}: the folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"--output {path}: cannot write ({exc.strerror or exc})") from None


@contextlib.contextmanager
def cycle_collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while scanning and judging.

    A scan and the rules build tens of thousands of small objects and hardly any reference cycles (the
    ensemble graphs, freed at the next collection): the collector's passes over a 1,000-model
    repository find nothing and cost about 5% of the run.
    """
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _live(report: Report, tritonserver: str | None, load_timeout: float, strict: bool) -> Report:
    try:
        from repo_builder.validate.live import LiveSettings, validate_live
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("repo_builder"):
            raise UserError("--live is not available in this build (repo_builder.validate.live is missing)") from None
        raise
    settings = LiveSettings(tritonserver=tritonserver, load_timeout=load_timeout, strict=strict)
    return validate_live(report, settings)


@click.command("validate")
@click.argument("path")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True, help="Report format.")
@click.option("--strict", is_flag=True, help="Judge as Triton with --disable-auto-complete-config: configs must be complete.")
@click.option(
    "--fail-on",
    type=click.Choice(("error", "warning")),
    default="error",
    show_default=True,
    help="Exit 1 on errors only, or on warnings too.",
)
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the report to this file.")
@click.option("--triton-release", metavar="YY.MM", help="Target Triton release (e.g. 24.08) for TensorRT version checks.")
@click.option("--allow-pending", is_flag=True, help="TensorRT plans still to be compiled are warnings, not errors.")
@click.option("--gpu/--no-gpu", default=None, help="Whether KIND_GPU instance groups can load [default: nvidia-smi on PATH].")
@click.option("--live", is_flag=True, help="Also load every model in a real tritonserver and report what it says.")
@click.option("--tritonserver", metavar="PATH", help="tritonserver binary for --live [default: the one PyTriton ships].")
@click.option("--load-timeout", type=float, default=60.0, show_default=True, metavar="SECONDS", help="Per-model load timeout for --live.")
@click.option("--s3-endpoint", metavar="URL", help="S3 endpoint for s3:// paths [default: $AWS_ENDPOINT_URL].")
@click.option(
    "--max-download",
    type=click.IntRange(min=0),
    default=16,
    show_default=True,
    metavar="MB",
    help="For s3:// paths: largest ONNX file fetched to check its inputs and outputs.",
)
def command(
    path: str,
    fmt: str,
    strict: bool,
    fail_on: str,
    output: Path | None,
    triton_release: str | None,
    allow_pending: bool,
    gpu: bool | None,
    live: bool,
    tritonserver: str | None,
    load_timeout: float,
    s3_endpoint: str | None,
    max_download: int,
) -> int:
    """Check the Triton model repository PATH (a folder or s3://bucket/prefix) offline.

    Exit 0 when Triton would load everything, 1 when it would refuse something (or warnings with
    --fail-on warning), 2 for usage errors.
    """
    from repo_builder.validate.engine import check_repository
    from repo_builder.validate.records import Severity, ValidateOptions
    from repo_builder.validate.reporters import render_report

    if not live and (tritonserver is not None or load_timeout != 60.0):
        raise click.UsageError("--tritonserver and --load-timeout only apply with --live")
    if load_timeout <= 0:
        raise click.UsageError("--load-timeout must be positive")
    if live and "://" in path:
        # The local mirror of an object store holds only small files: a server could not load from it.
        raise click.UsageError("--live needs a local repository folder; copy the s3:// repository down first")
    options = ValidateOptions(
        strict=strict,
        triton_release=triton_release,
        allow_pending=allow_pending,
        gpu_present=detect_gpu() if gpu is None else gpu,
    )
    color = output is None and fmt == "text" and sys.stdout.isatty() and "NO_COLOR" not in os.environ

    def judge(repository: Repository) -> tuple[Report, str]:
        with cycle_collector_paused():
            report = check_repository(repository, options)
        if live:
            report = _live(report, tritonserver, load_timeout, strict)
        return report, render_report(report, fmt, color=color)

    if "://" in path:  # an object store URL (remote.py checks the scheme)
        from repo_builder.validate.remote import mirror_repository

        with mirror_repository(path, s3_endpoint, max_download << 20) as repository:
            report, text = judge(repository)
    else:
        from repo_builder.validate.scan import scan_repository

        with cycle_collector_paused():
            repository = scan_repository(path)
        report, text = judge(repository)
    if output is not None:
        write_atomic(output, text)
        from repo_builder.validate.reporters import render_text

        click.echo(render_text(report).rstrip().splitlines()[-1], err=True)
    else:
        click.echo(text, nl=False)
    return report.exit_code(Severity(fail_on))
