"""``repo-builder publish REPO URL``: put a repository into an object store in an order a polling
Triton can follow, then validate what is there."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from repo_builder.cli.options import (
    Output,
    endpoint_options,
    gpu_option,
    output_options,
    target_line,
    timeout_option,
)
from repo_builder.errors import UserError
from repo_builder.fsutil import write_json_atomic
from repo_builder.repository.kserve import check_name, settings_for, write_inference_service
from repo_builder.repository.manifest import read_manifest
from repo_builder.repository.publish import PublishOptions, PublishResult, publish_repository
from repo_builder.safe_paths import ReportWrite, report_write, write_in_place
from repo_builder.store.deadline import store_deadline
from repo_builder.store.urls import parse_store_url
from repo_builder.validate.location import target_has_gpu
from repo_builder.validate.records import ValidateOptions


def _print_result(result: PublishResult, output: Output) -> None:
    if output.json:
        output.report(json.dumps(result.to_json(), indent=2))
        return
    output.report(
        f"--model-repository={result.triton_url}\n"
        "Triton reads the credentials from: " + ", ".join(result.plan.location.triton_environment())
    )


@click.command("publish")
@click.argument("repo", type=click.Path(path_type=Path, file_okay=False))
@click.argument("url")
@endpoint_options
@click.option("--force", is_flag=True, help="Publish even when the validator refuses the repository.")
@click.option("--prune", is_flag=True, help="Delete files (and versions) in the store that the local repository lacks.")
@click.option("--dry-run", is_flag=True, help="Print what would be uploaded and deleted; change nothing.")
@gpu_option
@click.option("--retries", type=click.IntRange(min=0), default=3, show_default=True, help="Retries of a failed request.")
@click.option("--report", type=click.Path(path_type=Path, dir_okay=False), help="Write a JSON report of the publish here.")
@click.option("--kserve", "kserve_name", metavar="NAME", help="Also write a KServe InferenceService NAME next to the report.")
@click.option("--kserve-gpus", type=click.IntRange(min=0), default=0, show_default=True, help="GPUs the InferenceService asks for.")
@click.option("--kserve-service-account", metavar="NAME", help="Service account holding the store's credentials.")
@timeout_option
@output_options
def command(
    repo: Path,
    url: str,
    endpoint_url: str | None,
    force: bool,
    prune: bool,
    dry_run: bool,
    gpu: bool | None,
    retries: int,
    report: Path | None,
    kserve_name: str | None,
    kserve_gpus: int,
    kserve_service_account: str | None,
    timeout: float,
    output: Output,
) -> int:
    """Upload the model repository REPO to URL (s3://bucket/prefix, s3://host:port/bucket/prefix, gs://, az://).

    Validates first, uploads only what changed (sha256 in the object metadata), every model's files
    before its config.pbtxt and members before their ensembles, keeps empty version folders with a
    placeholder, deletes nothing unless --prune, and validates the remote copy at the end. Exit 0 when
    the published repository validates, 1 when it (or the local one) is refused, 2 for a bad URL or
    folder, 3 when the store cannot be reached.
    """
    location = parse_store_url(url, endpoint_url)
    if kserve_name is not None:
        check_name(kserve_name)
    if report is not None and not report.parent.is_dir():
        raise UserError(f"--report {report}: the folder {report.parent} does not exist")
    report_mode = report_write(report, "--report") if report is not None else None  # a link, a FIFO: refused
    options = PublishOptions(
        force=force,
        prune=prune,
        dry_run=dry_run,
        validate=ValidateOptions(gpu_present=target_has_gpu(gpu)),
        attempts=retries + 1,
    )
    output.progress(target_line(gpu))
    tty = sys.stderr.isatty() and not output.quiet
    with store_deadline(timeout):
        result = publish_repository(repo, location, options, output.progress, tty=tty)
    if dry_run:
        _print_result(result, output)  # what the servers would be given; nothing was written
        return 0
    if report is not None and report_mode is ReportWrite.IN_PLACE:
        write_in_place(report, json.dumps(result.to_json(), indent=2) + "\n")
    elif report is not None:
        write_json_atomic(report, result.to_json())
    if kserve_name is not None:
        folder = report.parent if report is not None else Path.cwd()
        target = read_manifest(Path(repo)).get("target")
        release = target.get("release") if isinstance(target, dict) and isinstance(target.get("release"), str) else None
        settings = settings_for(kserve_name, location, kserve_gpus, kserve_service_account, release=release)
        output.progress(f"kserve: wrote {write_inference_service(settings, folder)}")
    _print_result(result, output)
    return 0
