"""``repo-builder compile-pending REPO``: the GPU half of a split CI; build every pending plan in place."""

from __future__ import annotations

from pathlib import Path

import click

from repo_builder.cli.options import device_option
from repo_builder.compile.settings import BUILDERS


@click.command("compile-pending")
@click.argument("repository", type=click.Path(path_type=Path, file_okay=False))
@click.option("--builder", type=click.Choice(BUILDERS), default=None, help="Override each recipe's builder.")
@click.option("--timing-cache", type=click.Path(path_type=Path, dir_okay=False), default=None, help="Timing cache shared by every build (reused and updated).")
@click.option("--keep-onnx", is_flag=True, help="Keep model.source.onnx after its plan is built (per-capability recipes always keep it).")
@click.option("--triton-release", default=None, metavar="YY.MM", help="Check the plans' TensorRT version against this Triton release.")
@click.option("--no-validate", "skip_validate", is_flag=True, help="Do not validate the repository afterwards.")
@device_option
def command(
    repository: Path,
    builder: str | None,
    timing_cache: Path | None,
    keep_onnx: bool,
    triton_release: str | None,
    skip_validate: bool,
    device: int,
) -> int:
    """Build every pending TensorRT plan of REPO on this GPU, update the configs, then validate."""
    from repo_builder.compile import compile_pending, find_pending
    from repo_builder.compile.releases import normalize_release
    from repo_builder.errors import UserError

    if not repository.is_dir():
        raise UserError(f"{repository}: no such folder; pass the model repository's path")
    if triton_release:
        normalize_release(triton_release)
    pending = find_pending(repository)
    click.echo(f"{len(pending)} pending TensorRT plan(s) in {repository}", err=True)
    result = compile_pending(
        repository,
        builder=builder,
        timing_cache=timing_cache,
        keep_onnx=keep_onnx,
        triton_release=triton_release,
        validate=not skip_validate,
        log=lambda m: click.echo(m, err=True),
        device=device,
    )
    for artifact in result.built:
        click.echo(f"built {artifact.plan_path}")
    if result.report is None:
        return 0
    for d in result.report.diagnostics:
        click.echo(f"{d.path}: {d.severity.value} {d.code} {d.rule}: {d.message}")
    status = "ok" if result.report.ok else "has errors"
    click.echo(f"validation: {repository} {status}", err=True)
    return result.report.exit_code()
