"""``repo-builder compile-pending REPO``: the GPU half of a split CI; build every pending plan in place,
then validate the repository (the validation is called from here, so ``compile`` never imports ``validate``)."""

from __future__ import annotations

from pathlib import Path

import click

from repo_builder.cli.options import Output, device_option, log_options
from repo_builder.compile.pending import compile_pending, find_pending
from repo_builder.compile.plan import require_buildable_tensorrt
from repo_builder.compile_recipe import BUILDERS
from repo_builder.errors import UserError
from repo_builder.gpu import gpu_present
from repo_builder.pipelines.plan_gate import gated_ensembles, gpu_name, record_plan_gate, regate
from repo_builder.tensorrt_releases import expected_tensorrt, normalize_release
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import ValidateOptions
from repo_builder.validate.reporters.formatting import format_diagnostic


@click.command("compile-pending")
@click.argument("repository", type=click.Path(path_type=Path, file_okay=False))
@click.option("--builder", type=click.Choice(BUILDERS), default=None, help="Override each recipe's builder.")
@click.option("--timing-cache", type=click.Path(path_type=Path, dir_okay=False), default=None, help="Timing cache shared by every build (reused and updated).")
@click.option("--keep-onnx", is_flag=True, help="Keep model.source.onnx after its plan is built (per-capability recipes always keep it).")
@click.option("--triton-release", default=None, metavar="YY.MM", help="The Triton release that will serve the plans: this machine's TensorRT must be the one it ships.")
@click.option("--tensorrt-version", default=None, metavar="X.Y.Z", help="The TensorRT version the serving Triton ships (overrides the --triton-release table).")
@click.option("--no-validate", "skip_validate", is_flag=True, help="Do not validate the repository afterwards.")
@click.option("--accuracy-data", type=click.Path(path_type=Path), default=None,
              help="The data a gated --precision build measured on: serve the built plans and run its gate again (docs/precision.md).")
@click.option("--tritonserver", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="--accuracy-data: the tritonserver (with its TensorRT backend) that serves the plans.")
@device_option
@log_options
def command(
    repository: Path,
    builder: str | None,
    timing_cache: Path | None,
    keep_onnx: bool,
    triton_release: str | None,
    tensorrt_version: str | None,
    skip_validate: bool,
    accuracy_data: Path | None,
    tritonserver: Path | None,
    device: int,
    output: Output,
) -> int:
    """Build every pending TensorRT plan of REPO on this GPU, update the configs, then validate."""
    if not repository.is_dir():
        raise UserError(f"{repository}: no such folder; pass the model repository's path")
    # Refuse an unknown release before any GPU work (exit 2, listing the known releases).
    expected = expected_tensorrt(triton_release, tensorrt_version)
    if expected is not None:
        require_buildable_tensorrt(expected)
    pending = find_pending(repository)
    output.progress(f"{len(pending)} pending TensorRT plan(s) in {repository}")
    result = compile_pending(
        repository,
        builder=builder,
        timing_cache=timing_cache,
        keep_onnx=keep_onnx,
        expected_tensorrt=expected,
        log=output.progress,
        device=device,
    )
    for artifact in result.built:
        click.echo(f"built {artifact.plan_path}")
    gates_failed = _gate_plans(repository, accuracy_data, tritonserver, output) if result.built else False
    if skip_validate:
        return 0
    release = normalize_release(triton_release) if triton_release and tensorrt_version is None else None
    report = validate_repository(repository, ValidateOptions(triton_release=release, gpu_present=gpu_present()))
    for d in report.diagnostics:
        click.echo(format_diagnostic(d))
    click.echo(f"validation: {repository} {'ok' if report.ok else 'has errors'}", err=True)
    return max(report.exit_code(), 1 if gates_failed else 0)


def _gate_plans(repository: Path, accuracy_data: Path | None, tritonserver: Path | None, output: Output) -> bool:
    """The gate of every gated ensemble, run again against the plans just built; True when one fails."""
    gated = gated_ensembles(repository)
    if not gated:
        return False
    if accuracy_data is None:
        output.progress(f"warning: {', '.join(gated)} passed their gate with ONNX Runtime, not yet as TensorRT plans "
                        "(Q/DQ can answer differently there): pass --accuracy-data to measure the plans")
        return False
    failed = False
    for ensemble in gated:
        gate = regate(repository, accuracy_data, ensemble=ensemble, measured_on=f"the TensorRT plan on {gpu_name()}",
                      log=output.progress, tritonserver=str(tritonserver) if tritonserver else None)
        record_plan_gate(repository, gate)
        figure = gate.figures.get(gate.metric, 0.0)
        click.echo(f"{ensemble}: {gate.metric} {figure:.4f} served as a TensorRT plan (gate >= {gate.threshold:g}): "
                   + ("passes" if gate.passed else "FAILS; publish refuses it"))
        failed = failed or not gate.passed
    return failed
