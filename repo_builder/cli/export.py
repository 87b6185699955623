"""``repo-builder export``: torch models to ONNX + signature.json, checked against ONNX Runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from repo_builder.cli.options import option_group

# These modules are light at import time (torch is imported inside their functions).
from repo_builder.export.exporter import DEFAULT_OPSET
from repo_builder.export.parity import DEFAULT_TOLERANCE
from repo_builder.export.resnet50 import export_resnet50
from repo_builder.export.text_classifier import export_text_classifier, head_labels
from repo_builder.export.torchvision_classifier import export_torchvision_classifier, parse_model
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



def _export_settings(opset: int, tolerance: float, no_parity: bool, quiet: bool, verbose: bool = False) -> dict[str, Any]:
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
def resnet50(weights: str, dynamic_hw: bool, out_dir: Path, **settings: Any) -> int:
    """torchvision ResNet50: NCHW float32 input, dynamic batch axis."""
    artifact = export_resnet50(out_dir, weights=weights, dynamic_hw=dynamic_hw, **_export_settings(**settings))
    _print_summary(artifact)
    return 0


@command.command("image-classifier")
@click.option(
    "--model",
    required=True,
    metavar="torchvision:NAME|PATH",
    help="torchvision:NAME (any torchvision classification model) or PATH.pt: a whole pickled model "
    "(only files you trust: loading runs it) or a state_dict with --arch.",
)
@click.option("--weights", default="default", show_default=True, metavar="default|random|PATH",
              help="torchvision:NAME only: its pretrained DEFAULT weights (download cache), seeded random weights, or a state_dict file.")
@click.option("--arch", default=None, metavar="NAME", help="The torchvision architecture of a --model PATH state_dict.")
@click.option("--dynamic-hw", is_flag=True, help="Make height and width dynamic too (default: the weights' crop size).")
@_common_options
def image_classifier(model: str, weights: str, arch: str | None, dynamic_hw: bool, out_dir: Path, **settings: Any) -> int:
    """Any torchvision image classifier: NCHW float32 input, dynamic batch axis, the weights' own transforms recorded."""
    choice = parse_model(model, weights=weights, arch=arch)
    artifact = export_torchvision_classifier(out_dir, choice, dynamic_hw=dynamic_hw, **_export_settings(**settings))
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
@click.option(
    "--new-head",
    type=click.Path(path_type=Path),
    default=None,
    metavar="LABELS_FILE",
    help="A checkpoint without a classification head (a bare encoder): add an untrained one with these labels.",
)
@click.option("--num-labels", type=int, default=None, metavar="N", help="Like --new-head, with labels LABEL_0 ... LABEL_N-1.")
@_common_options
def text_classifier(
    model_dir: Path, max_length: int | None, new_head: Path | None, num_labels: int | None, out_dir: Path, **settings: Any
) -> int:
    """Hugging Face sequence classifier: dynamic batch and sequence axes, tokenizer and labels saved beside it."""
    artifact = export_text_classifier(
        model_dir,
        out_dir,
        max_length=max_length,
        new_head=head_labels(new_head, num_labels),
        **_export_settings(**settings),
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
    if meta.get("head") == "untrained":
        source = meta.get("source")
        untrained = source.get("newly_initialized", []) if isinstance(source, dict) else []
        click.echo(f"head: untrained (random, seeded): {', '.join(untrained[:4])}; fine-tune before serving")
