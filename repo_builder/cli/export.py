"""``repo-builder export FAMILY``: torch models to ONNX + signature.json, checked against ONNX Runtime.

The subcommands are the families of repo_builder/pipelines/registry.py that declare an export.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from repo_builder.cli.options import family_option, option_group

# These modules are light at import time (torch is imported inside their functions).
from repo_builder.export.exporter import DEFAULT_OPSET
from repo_builder.export.parity import DEFAULT_TOLERANCE
from repo_builder.pipelines.family import ExportSettings, Family, FamilyExport
from repo_builder.pipelines.registry import FAMILIES
from repo_builder.spec import OnnxArtifact

_common_options = option_group(
    click.option(
        "--out",
        "out_dir",
        required=True,
        type=click.Path(path_type=Path),
        help="Folder to write model.onnx, signature.json and labels.txt into (created if missing).",
    ),
    click.option(
        "--opset",
        type=int,
        default=DEFAULT_OPSET,
        show_default=True,
        help="ONNX opset (17: first with LayerNormalization; TensorRT >= 8.6 and ONNX Runtime support it).",
    ),
    click.option(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        show_default=True,
        help="Parity tolerance: max abs error, or max error relative to the output's largest value.",
    ),
    click.option("--no-parity", is_flag=True, help="Skip the ONNX Runtime vs PyTorch comparison."),
    click.option("--quiet", "-q", is_flag=True, help="No progress display."),
    click.option("-v", "--verbose", is_flag=True, help="Tracebacks for internal errors."),
)



@click.group("export")
def command() -> None:
    """Export a model to ONNX with dynamic axes, a signature file and a parity check."""


def family_command(chosen: Family, spec: FamilyExport) -> click.Command:
    """The ``export <family>`` subcommand: the family's own export options, then the shared ones."""

    def callback(out_dir: Path, opset: int, tolerance: float, no_parity: bool, quiet: bool, verbose: bool = False, **params: Any) -> int:
        settings = ExportSettings(out=out_dir, opset=opset, tolerance=tolerance, check_parity=not no_parity, progress=not quiet)
        _print_summary(spec.run(params, settings))
        return 0

    for decorate in reversed([*(family_option(o) for o in spec.options), _common_options]):
        callback = decorate(callback)
    return click.command(name=chosen.command, help=spec.summary, short_help=chosen.short_help)(callback)


for _family in FAMILIES.values():
    if _family.export is not None:
        command.add_command(family_command(_family, _family.export))


def _format_shape(shape: tuple[int | str, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _print_summary(artifact: OnnxArtifact) -> None:
    signature = artifact.signature
    meta = signature.metadata
    click.echo(
        f"wrote {artifact.onnx_path} (opset {meta.get('opset')}, sha256 {str(meta.get('onnx_sha256'))[:12]})"
    )
    click.echo(f"      {artifact.signature_path}")
    if artifact.tokenizer_dir is not None:
        click.echo(f"      {artifact.tokenizer_dir}/")
    click.echo(
        f"      {artifact.onnx_path.parent / str(meta.get('labels_file', 'labels.txt'))} ({len(artifact.labels)} labels)"
    )
    for kind, tensors in (("input ", signature.inputs), ("output", signature.outputs)):
        for t in tensors:
            click.echo(f"{kind} {t.name}: {t.dtype} ({t.triton_type}) {_format_shape(t.shape)}")
    if not signature.parity:
        # An export may say why it checked none (a detector's ONNX comes from its framework's own exporter).
        click.echo(f"parity: not checked ({meta.get('parity_note') or '--no-parity'})")
    for result in signature.parity:
        shapes = ", ".join(f"{name} {'x'.join(map(str, dims))}" for name, dims in result.shapes.items())
        verdict = "ok" if result.passed else "FAILED"
        click.echo(
            f"parity {verdict}: {shapes}: max abs {result.max_abs_error:.2e}, max rel {result.max_rel_error:.2e}"
        )
    if meta.get("head") == "untrained":
        source = meta.get("source")
        untrained = source.get("newly_initialized", []) if isinstance(source, dict) else []
        click.echo(f"head: untrained (random, seeded): {', '.join(untrained[:4])}; fine-tune before serving")
