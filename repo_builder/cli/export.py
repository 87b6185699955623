"""``repo-builder export``: torch models to ONNX + signature.json, checked against ONNX Runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from repo_builder.cli.options import option_group

# Both modules are light at import time (torch is imported inside their functions).
from repo_builder.export.exporter import DEFAULT_OPSET
from repo_builder.export.parity import DEFAULT_TOLERANCE
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
)



def _export_settings(opset: int, tolerance: float, no_parity: bool, quiet: bool) -> dict[str, Any]:
    """The shared options as the keyword arguments every ``export_*`` function takes."""
    return {"opset": opset, "check_parity": not no_parity, "tolerance": tolerance, "progress": not quiet}


@click.group("export")
def command() -> None:
    """Export a model to ONNX with dynamic axes, a signature file and a parity check."""


@command.command("resnet50")
@click.option(
    "--weights",
    default="imagenet",
    show_default=True,
    metavar="imagenet|random|PATH",
    help="torchvision IMAGENET1K_V2 (download cache), seeded random weights, or a state_dict file.",
)
@click.option(
    "--dynamic-hw", is_flag=True, help="Make height and width dynamic too (default: fixed 224x224)."
)
@_common_options
def resnet50(
    weights: str, dynamic_hw: bool, out_dir: Path, opset: int, tolerance: float, no_parity: bool, quiet: bool
) -> int:
    """torchvision ResNet50: NCHW float32 input, dynamic batch axis."""
    from repo_builder.export.resnet50 import export_resnet50

    artifact = export_resnet50(out_dir, weights=weights, dynamic_hw=dynamic_hw, **_export_settings(opset, tolerance, no_parity, quiet))
    _print_summary(artifact)
    return 0


@command.command("text-classifier")
@click.option(
    "--model",
    "model_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Local Hugging Face sequence-classification folder (config, weights, fast tokenizer).",
)
@click.option(
    "--max-length",
    type=int,
    default=None,
    help="Longest token sequence to serve (default: the model's maximum positions).",
)
@_common_options
def text_classifier(
    model_dir: Path,
    max_length: int | None,
    out_dir: Path,
    opset: int,
    tolerance: float,
    no_parity: bool,
    quiet: bool,
) -> int:
    """Hugging Face sequence classifier: dynamic batch and sequence axes, tokenizer and labels saved beside it."""
    from repo_builder.export.text_classifier import export_text_classifier

    artifact = export_text_classifier(
        model_dir, out_dir, max_length=max_length, **_export_settings(opset, tolerance, no_parity, quiet)
    )
    _print_summary(artifact)
    return 0


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
        click.echo("parity: not checked (--no-parity)")
    for result in signature.parity:
        shapes = ", ".join(f"{name} {'x'.join(map(str, dims))}" for name, dims in result.shapes.items())
        verdict = "ok" if result.passed else "FAILED"
        click.echo(
            f"parity {verdict}: {shapes}: max abs {result.max_abs_error:.2e}, max rel {result.max_rel_error:.2e}"
        )
    untrained = (
        meta.get("source", {}).get("newly_initialized") if isinstance(meta.get("source"), dict) else None
    )
    if untrained:
        click.echo(
            f"note: {len(untrained)} weight(s) were not in the folder and start untrained: {', '.join(untrained[:4])}"
        )
