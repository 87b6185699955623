"""Text classification: text (TYPE_STRING [1]) -> tokenizer (Python) -> model -> top-k postprocess (Python).

The preprocessing step emits exactly the model's inputs (names and integer dtypes from the signature),
padded per batch, so the model step receives requests of equal shapes it can batch again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError
from repo_builder.export.hub_model import resolve_model
from repo_builder.export.text_classifier import export_text_classifier, head_labels
from repo_builder.pipelines.classification import (
    classifier_logits,
    family_labels,
    render_classification_pipeline,
)
from repo_builder.pipelines.family import ExportSettings, FamilyExport, FamilyJob, FamilyOption, RenderInputs
from repo_builder.pipelines.settings import ModelSource, PipelineSettings, budget_context, step_names
from repo_builder.pipelines.steps import preprocess_metadata, render_preprocess_step
from repo_builder.pipelines.text_tokenizer_onnx import OPTIONS as PREPROCESS_OPTIONS
from repo_builder.pipelines.text_tokenizer_onnx import (
    check_checkpoint_tokenizer,
    render_tokenizer_step,
    wants_onnx,
)
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source, render_text
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact, Signature

if TYPE_CHECKING:
    from repo_builder.export.progress import Phases
    from repo_builder.pipelines.assemble import BuildOptions

TEXT_INPUT = "TEXT"


def tokenizer_files(tokenizer_dir: Path) -> dict[str, Path]:
    """Files of the saved fast tokenizer, placed under tokenizer/ in the preprocessing version folder."""
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise UserError(f"{tokenizer_dir}: no tokenizer.json; the preprocessing step needs a saved fast tokenizer")
    return {f"tokenizer/{p.name}": p for p in sorted(tokenizer_dir.iterdir()) if p.is_file()}


def render_text_pipeline(
    env: Any,
    source: ModelSource,
    onnx_signature: Signature,
    labels: Sequence[str],
    settings: PipelineSettings,
    versions: Mapping[str, int],
    tokenizer_dir: Path,
    origin: str = "signature.json",
    onnx_inputs: RenderInputs | None = None,
) -> tuple[RenderedModel, ...]:
    """The classification pipeline; with ``onnx_inputs`` (--preprocess onnx) its tokenizer is an ONNX Runtime step."""
    names = step_names(settings.name)
    sig = source.signature
    ctx.require_batch_axis(sig, origin)
    preprocess = preprocess_metadata(onnx_signature, origin, "tokenizer settings")
    pre = ctx.text_preprocess_context(names["preprocess"], names["model"], sig.inputs, preprocess, origin)
    for spec in sig.inputs:
        if len(spec.triton_dims(sig.batch_axis)) != 1:
            raise UserError(f"{origin}: input '{spec.name}' must be (batch, sequence), got {list(spec.shape)}")
    logits = classifier_logits(sig, labels, origin)

    if onnx_inputs is not None:
        pre_model = render_tokenizer_step(onnx_inputs, sig.inputs, int(pre["max_length"]), tokenizer_dir, TEXT_INPUT)
    else:
        budget = budget_context(settings)
        files: dict[str, Path | bytes] = {"model.py": render_source(env, "model/text_preprocess.py.j2", {**pre, **budget}).encode()}
        limits = ctx.limits_readme_context(names["preprocess"], max_length=int(pre["max_length"]), budget=budget)
        files["README.md"] = render_text(env, "model/preprocess_README.md.j2", limits).encode()
        files.update(tokenizer_files(tokenizer_dir))
        pre_model = render_preprocess_step(
            env,
            settings,
            versions[names["preprocess"]],
            pipeline_input=TEXT_INPUT,
            outputs=[ctx.tensor_context(t.name, t.dtype, [-1]) for t in sig.inputs],
            comment="Preprocessing: one UTF-8 text per row -> token ids padded to the batch's longest (multiple of 8).",
            files=files,
        )
    return render_classification_pipeline(
        env,
        source,
        settings,
        versions,
        origin,
        preprocess=pre_model,
        pipeline_input=TEXT_INPUT,
        model_inputs=[t.name for t in sig.inputs],
        logits=logits,
        labels=labels,
        comment="Clients call this: TEXT (UTF-8, TYPE_STRING [1]) -> LABELS, SCORES, CLASS_IDS (top-k).",
    )


# --- the family record's parts (pipelines/registry.py) ----------------------------------------------------

TEMPLATES = ("model/text_preprocess.py.j2", "model/_text_bounds.py.j2", "model/_request_budget.py.j2", "model/_failure.py.j2", "model/classification_postprocess.py.j2",
             "model/preprocess_README.md.j2")
TEXT_CLASSIFIER_OPTIONS = (
    FamilyOption(("--model",), "model", "Hugging Face sequence-classification model folder (config, weights, tokenizer).", kind="path"),
    FamilyOption(("--max-length",), "max_length", "Truncate texts to this many tokens (default: the model's maximum).", kind="int"),
    FamilyOption(("--new-head",), "new_head", "A checkpoint without a classification head (a bare encoder): add an untrained one "
                 "with these labels (one per line); signature.json records head: untrained.", kind="path", metavar="LABELS_FILE"),
    FamilyOption(("--num-labels",), "num_labels", "Like --new-head, with N labels named LABEL_0 ... LABEL_N-1.", kind="int", metavar="N"),
    *PREPROCESS_OPTIONS,
)


def export_tokenizer_dir(artifact: OnnxArtifact) -> Path:
    """The export's saved tokenizer folder (metadata.preprocess.tokenizer_dir beside model.onnx)."""
    if artifact.tokenizer_dir is not None:
        return artifact.tokenizer_dir
    preprocess = artifact.signature.metadata.get("preprocess")
    name = preprocess.get("tokenizer_dir", "tokenizer") if isinstance(preprocess, dict) else "tokenizer"
    return artifact.onnx_path.parent / str(name)


def render_family(inputs: RenderInputs) -> tuple[RenderedModel, ...]:
    labels = family_labels(inputs)
    return render_text_pipeline(inputs.env, inputs.source, inputs.artifact.signature, labels, inputs.settings, inputs.versions,
                                export_tokenizer_dir(inputs.artifact), origin=inputs.origin,
                                onnx_inputs=inputs if wants_onnx(inputs.params) else None)


def prepare_text_classifier(params: Mapping[str, Any], options: BuildOptions, phases: Phases) -> FamilyJob:
    """--model FOLDER (checked now), --max-length, --new-head/--num-labels for a checkpoint without a head."""
    model_dir = params.get("model")
    if model_dir is None:
        raise UserError("build text-classifier needs exactly one of --model PATH or --from-export DIR")
    model_dir = resolve_model(model_dir)  # a folder, or a Hub id: from the local cache, else downloaded
    if not model_dir.is_dir():
        raise UserError(f"--model {model_dir}: no such folder; pass a Hugging Face model folder (config, weights, tokenizer)")
    max_length = params.get("max_length")
    if max_length is not None and max_length < 1:
        raise UserError(f"--max-length must be >= 1, got {max_length}")
    new_head = head_labels(params.get("new_head"), params.get("num_labels"))
    check_checkpoint_tokenizer(params, model_dir)

    def export(folder: Path) -> OnnxArtifact:
        return export_text_classifier(
            model_dir, folder, max_length=max_length, check_parity=options.check_parity, new_head=new_head, phases=phases
        )

    record = {"model": str(model_dir.resolve()), "max_length": max_length, "new_head": new_head is not None,
              "preprocess": "onnx" if wants_onnx(params) else "python"}
    return FamilyJob(export=export, record=record, describe=f"exporting {model_dir.name} to ONNX")


# --- its ``repo-builder export text-classifier`` -------------------------------------------------------------

EXPORT_OPTIONS = (
    FamilyOption(("--model",), "model", "Local Hugging Face sequence-classification folder (config, weights, fast tokenizer).",
                 kind="path", required=True),
    FamilyOption(("--max-length",), "max_length", "Longest token sequence to serve (default: the model's maximum positions).", kind="int"),
    FamilyOption(("--new-head",), "new_head", "A checkpoint without a classification head (a bare encoder): add an untrained one "
                 "with these labels.", kind="path", metavar="LABELS_FILE"),
    FamilyOption(("--num-labels",), "num_labels", "Like --new-head, with labels LABEL_0 ... LABEL_N-1.", kind="int", metavar="N"),
)


def run_export(params: Mapping[str, Any], settings: ExportSettings) -> OnnxArtifact:
    """Hugging Face sequence classifier: dynamic batch and sequence axes, tokenizer and labels saved beside it."""
    return export_text_classifier(
        Path(params["model"]), settings.out, max_length=params.get("max_length"),
        new_head=head_labels(params.get("new_head"), params.get("num_labels")), **settings.kwargs(),
    )


EXPORT = FamilyExport(run_export.__doc__ or "", EXPORT_OPTIONS, run_export)
