"""``repo-builder pull URL DIR``: download a repository from an object store, validated, whole or not at all."""

from __future__ import annotations

import json
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
from repo_builder.repository.pull import PullOptions, pull_repository
from repo_builder.store.deadline import store_deadline
from repo_builder.store.urls import parse_store_url
from repo_builder.validate.location import target_has_gpu
from repo_builder.validate.records import ValidateOptions


@click.command("pull")
@click.argument("url")
@click.argument("out_dir", metavar="DIR", type=click.Path(path_type=Path))
@endpoint_options
@click.option("--all", "all_files", is_flag=True, help="Every object, not only the versions Triton would load.")
@click.option("--replace", is_flag=True, help="Replace DIR when it is not empty.")
@click.option("--force", is_flag=True, help="Move the repository into place even when the validator refuses it.")
@gpu_option
@click.option("--retries", type=click.IntRange(min=0), default=3, show_default=True, help="Retries of a failed request.")
@timeout_option
@output_options
def command(
    url: str,
    out_dir: Path,
    endpoint_url: str | None,
    all_files: bool,
    replace: bool,
    force: bool,
    gpu: bool | None,
    retries: int,
    timeout: float,
    output: Output,
) -> int:
    """Download the repository at URL into DIR (staged beside it, validated, then renamed into place).

    Exit 0 when it is in place and validates, 1 when it is refused (DIR is left untouched), 2 for a bad
    URL or folder, 3 when the store cannot be reached.
    """
    location = parse_store_url(url, endpoint_url)
    options = PullOptions(
        all_files=all_files,
        replace=replace,
        force=force,
        validate=ValidateOptions(gpu_present=target_has_gpu(gpu)),
        attempts=retries + 1,
    )
    output.progress(target_line(gpu))
    with store_deadline(timeout):
        result = pull_repository(location, out_dir, options, output.progress)
    if output.json:
        output.report(json.dumps({"url": location.url, "dir": str(result.out_dir), "files": list(result.files),
                                  "bytes": result.total_bytes, "ok": result.report.ok}, indent=2))
    else:
        output.report(str(result.out_dir))
    return 0 if result.report.ok else 1
