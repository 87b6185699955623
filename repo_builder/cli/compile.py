"""``repo-builder compile ONNX --out DIR``: a TensorRT plan for this machine's GPU, with ``plan.json``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from repo_builder.cli.options import Output, device_option, log_options
from repo_builder.compile.plan import compile_plan, require_build_environment
from repo_builder.compile.profiles import parse_profile_options
from repo_builder.compile_recipe import BUILDERS, PRECISIONS, CompileSettings
from repo_builder.errors import UserError
from repo_builder.precision.convert import graph_for_precision
from repo_builder.spec import DEFAULT_MAX_BATCH_SIZE, read_signature


@click.command("compile")
@click.argument("onnx", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False), help="Folder for the plan and plan.json (a model version folder, say).")
@click.option("--signature", "signature_path", type=click.Path(path_type=Path, dir_okay=False), help="signature.json (default: the one beside the ONNX).")
@click.option("--builder", type=click.Choice(BUILDERS), default="auto", show_default=True, help="TensorRT's Python API, trtexec, or whichever is installed (API first).")
@click.option(
    "--profile",
    "profile_values",
    multiple=True,
    metavar="NAME:MIN,OPT,MAX",
    help="Shape range for one input, e.g. input_ids:1x8,8x128,64x512 (join several with ';'). Repeat the "
    "option for more inputs; naming an input again starts the next optimization profile.",
)
@click.option("--max-batch-size", type=click.IntRange(min=0), default=DEFAULT_MAX_BATCH_SIZE, show_default=True, help="Batch axis range 1..N (0: the model does not batch).")
@click.option("--max-seq-len", type=click.IntRange(min=1), default=None, help="Upper bound of sequence axes (needed for text models).")
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp16", show_default=True,
              help="Decided in the graph (TensorRT 10 and 11 build it strongly typed): an fp32 ONNX is converted to fp16/bf16 "
              "first (not gated: 'build --precision' measures accuracy); int8 needs a Q/DQ ONNX.")
@click.option("--precision-flags", is_flag=True, help="TensorRT 10 only: its FP16/BF16/INT8 builder flags on the ONNX as it is, instead of a converted graph.")
@click.option("--timing-cache", type=click.Path(path_type=Path, dir_okay=False), default=None, help="Timing cache file: reused when present, updated after the build.")
@click.option("--opt-level", type=click.IntRange(0, 5), default=None, help="TensorRT builder optimization level (0-5).")
@click.option("--workspace", "workspace_mib", type=click.IntRange(min=1), default=None, help="Workspace memory pool limit, MiB.")
@click.option("--per-capability", is_flag=True, help="Name the plan model_smXY.plan for cc_model_filenames (one repository, several GPU generations).")
@device_option
@log_options
def command(
    onnx: Path,
    out_dir: Path,
    signature_path: Path | None,
    builder: str,
    profile_values: tuple[str, ...],
    max_batch_size: int,
    max_seq_len: int | None,
    precision: str,
    timing_cache: Path | None,
    opt_level: int | None,
    workspace_mib: int | None,
    per_capability: bool,
    precision_flags: bool,
    device: int,
    output: Output,
) -> int:
    """Build a TensorRT plan from ONNX for this machine's GPU; profiles come from the signature file."""
    if not onnx.is_file():
        raise UserError(f"{onnx}: no such ONNX file")
    signature = read_signature(signature_path or onnx)
    settings = CompileSettings(
        max_batch_size=max_batch_size,
        max_seq_len=max_seq_len,
        precision=precision,
        builder=builder,
        profiles=parse_profile_options(profile_values),
        timing_cache=timing_cache,
        opt_level=opt_level,
        workspace_mib=workspace_mib,
        per_capability=per_capability,
        precision_flags=precision_flags,
    )
    require_build_environment(builder, device)  # no GPU here: say so before converting anything
    with tempfile.TemporaryDirectory(prefix="repo-builder-precision-") as scratch:
        graph, note = graph_for_precision(onnx, precision, Path(scratch), flags=precision_flags)
        if note:
            output.progress(f"{onnx.name}: {note}")
        artifact = compile_plan(graph, signature, out_dir, settings, log=output.progress, device=device)
    click.echo(f"wrote {artifact.plan_path} and {artifact.sidecar_path.name} (TensorRT {artifact.tensorrt_version}, compute capability {artifact.compute_capability})")
    if per_capability:
        click.echo(f'config: cc_model_filenames {{ key: "{artifact.compute_capability}" value: "{artifact.plan_path.name}" }}')
    return 0
