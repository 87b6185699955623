"""``repo-builder build resnet50|text-classifier``: a complete, versioned Triton repository in one command."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from repo_builder.cli.options import option_group
from repo_builder.compile.settings import PRECISIONS
from repo_builder.errors import UserError

if TYPE_CHECKING:
    from repo_builder.pipelines.assemble import BuildOptions, BuildResult
    from repo_builder.pipelines.runtime import RuntimeChoice


def _log(message: str) -> None:
    # Progress always goes to stderr, so with --json stdout carries only the JSON summary.
    click.echo(message, err=True)


common_options = option_group(
    click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="Model repository folder to write into (created if missing)."),
    click.option("--name", default=None, help="Ensemble name clients call; members are NAME_preprocess, NAME_model, NAME_postprocess."),
    click.option("--runtime", type=click.Choice(["auto", "tensorrt", "onnxruntime", "python"]), default="auto", show_default=True,
                 help="Model step: TensorRT plan, Triton's ONNX Runtime backend, or ONNX Runtime inside the Python backend. "
                      "auto: tensorrt with a GPU and TensorRT, else python."),
    click.option("--max-batch-size", type=int, default=8, show_default=True, help="max_batch_size of every step (the ensemble never exceeds its members)."),
    click.option("--version", "version", type=int, default=None, help="Version folder to write (default: the next free version of every step)."),
    click.option("--force", is_flag=True, help="Replace an existing version folder."),
    click.option("--templates", type=click.Path(path_type=Path), default=None, help="Folder of Jinja2 templates overriding the shipped ones by name."),
    click.option("--top-k", type=int, default=5, show_default=True, help="How many labels and scores the ensemble returns."),
    click.option("--labels", type=click.Path(path_type=Path), default=None, help="Labels file (one per line, in output order) instead of the model's own."),
    click.option("--defer-compile", is_flag=True, help="tensorrt: write the ONNX and a compile recipe; build plans later with 'repo-builder compile-pending'."),
    click.option("--precision", type=click.Choice(PRECISIONS), default="fp16", show_default=True, help="tensorrt: plan precision."),
    # --no-parity as in `export`; --skip-parity kept as an alias.
    click.option("--no-parity", "--skip-parity", "skip_parity", is_flag=True, help="Skip the ONNX Runtime vs PyTorch parity check during export."),
    click.option("--live", is_flag=True, help="After building, load every model into the embedded Triton and send one request per ensemble."),
    click.option("--tritonserver", type=click.Path(path_type=Path), default=None, help="--live: this tritonserver binary instead of the embedded one."),
    click.option("--json", "as_json", is_flag=True, help='Print a JSON summary on stdout: {"repository", "ensemble", "models": [...]}.'),
)


def _options(kwargs: dict[str, Any], default_name: str) -> tuple[BuildOptions, RuntimeChoice]:
    """BuildOptions from the shared CLI options, and the runtime choice (printed: which and why)."""
    from repo_builder.pipelines.assemble import BuildOptions
    from repo_builder.pipelines.common import PipelineSettings
    from repo_builder.pipelines.runtime import probe_runtime

    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:/", str(kwargs["out"])):  # s3://, gs:// ... (s3:/ once a Path)
        raise UserError(f"--out {kwargs['out']}: build writes a local folder; build locally, then copy it to the object store")
    if kwargs["templates"] is not None and not kwargs["templates"].is_dir():
        raise UserError(f"--templates {kwargs['templates']}: not a folder; pass a copy of the shipped templates/ folder")
    if kwargs["max_batch_size"] < 1:
        raise UserError(f"--max-batch-size must be >= 1 (every step batches dynamically), got {kwargs['max_batch_size']}")
    if kwargs["top_k"] < 1:
        raise UserError(f"--top-k must be >= 1, got {kwargs['top_k']}")
    if kwargs["version"] is not None and kwargs["version"] < 1:
        raise UserError(f"--version must be >= 1, got {kwargs['version']}")
    choice = probe_runtime(kwargs["runtime"], defer_compile=kwargs["defer_compile"])
    settings = PipelineSettings(
        name=kwargs["name"] or default_name,
        runtime=choice.runtime,
        max_batch_size=kwargs["max_batch_size"],
        top_k=kwargs["top_k"],
    )
    compile_settings = None
    if choice.runtime == "tensorrt":
        from repo_builder.compile import CompileSettings

        compile_settings = CompileSettings(max_batch_size=kwargs["max_batch_size"], precision=kwargs["precision"])
        if not kwargs["defer_compile"]:
            # Fail before the export when this machine cannot build a plan, and say how to split the work.
            from repo_builder.compile.plan import require_build_environment

            try:
                require_build_environment(compile_settings.builder)
            except UserError as exc:
                raise UserError(f"{exc}; or pass --defer-compile and run 'repo-builder compile-pending' on a GPU machine") from None
    options = BuildOptions(
        out=kwargs["out"],
        settings=settings,
        version=kwargs["version"],
        force=kwargs["force"],
        templates=kwargs["templates"],
        labels=kwargs["labels"],
        defer_compile=kwargs["defer_compile"],
        compile_settings=compile_settings,
        check_parity=not kwargs["skip_parity"],
        runtime_reason=choice.reason,
    )
    return options, choice


def _finish(result: BuildResult, kwargs: dict[str, Any]) -> int:
    """Validate what was written (offline, then with --live on the real server); 1 when it fails."""
    from repo_builder.repository.verify_build import check_built

    outcome = check_built(result, log=_log, live=kwargs["live"], tritonserver=kwargs["tritonserver"])
    summary = result.to_json()
    summary["validation"] = outcome.to_json()
    code = 0 if outcome.ok else 1
    if kwargs["as_json"]:
        click.echo(json.dumps(summary, indent=2))
    else:
        models = ", ".join(f"{m.name}/{m.version} ({m.role})" for m in result.models)
        click.echo(f"built {result.repository}: {models}")
        click.echo(f"clients call '{result.ensemble}'" + (" once compile-pending has built the plan" if result.pending_compile else ""))
    return code


@click.group(name="build")
def command() -> None:
    """Build a Triton model repository: preprocessing, model, postprocessing and the ensemble clients call."""


@command.command(name="resnet50")
@click.option("--weights", default="imagenet", show_default=True, help="imagenet (torchvision's, from its download cache), random (seeded), or a state_dict file.")
@click.option("--from-export", type=click.Path(path_type=Path), default=None, help="Build from an existing 'repo-builder export resnet50' folder instead of exporting.")
@common_options
def resnet50(weights: str, from_export: Path | None, **kwargs: Any) -> int:
    """torchvision ResNet50: encoded image bytes in, top-k ImageNet labels out."""
    from repo_builder.pipelines.assemble import build_resnet50

    options, _ = _options(kwargs, "resnet50")
    result = build_resnet50(options, weights=weights, from_export=from_export, log=_log)
    return _finish(result, kwargs)


@command.command(name="text-classifier")
@click.option("--model", "model_dir", type=click.Path(path_type=Path), default=None, help="Hugging Face sequence-classification model folder (config, weights, tokenizer).")
@click.option("--from-export", type=click.Path(path_type=Path), default=None, help="Build from an existing 'repo-builder export text-classifier' folder instead of --model.")
@click.option("--max-length", type=int, default=None, help="Truncate texts to this many tokens (default: the model's maximum).")
@common_options
def text_classifier(model_dir: Path | None, from_export: Path | None, max_length: int | None, **kwargs: Any) -> int:
    """A Hugging Face text classifier: text in, top-k labels (id2label) out."""
    from repo_builder.pipelines.assemble import build_text_classifier

    if max_length is not None and max_length < 1:
        raise UserError(f"--max-length must be >= 1, got {max_length}")
    if (model_dir is None) == (from_export is None):
        raise UserError("build text-classifier needs exactly one of --model PATH or --from-export DIR")
    options, _ = _options(kwargs, "text_classifier")
    result = build_text_classifier(options, model_dir=model_dir, max_length=max_length, from_export=from_export, log=_log)
    return _finish(result, kwargs)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(command())
