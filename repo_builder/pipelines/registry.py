"""The model families ``repo-builder build`` and ``repo-builder export`` know: one record each.

A family (``family.Family``) declares everything task-specific: its export (or reading an existing one), what
its signature records, its pre and post steps (``render``), its CLI options and its reference check. The
model step, the ensemble, the writing and the build check are generic. Adding a family = its module, its
templates, its tests and ONE line in FAMILIES below (docs/new-family.md); ``cli/build.py`` and
``cli/export.py`` read their subcommands from FAMILIES.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.export.progress import Phases
from repo_builder.pipelines import (
    detection_reference,
    image_classification,
    instance_segmentation,
    object_detection,
    text_classification,
    text_embedding,
    text_recognition,
    token_classification,
)
from repo_builder.pipelines.assemble import BuildOptions, BuildResult, Log, build_pipeline, read_task_export
from repo_builder.pipelines.family import Family, FamilyJob, FamilyOption, RenderInputs
from repo_builder.pipelines.settings import ModelSource, PipelineSettings
from repo_builder.precision import metrics
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact

__all__ = ["FAMILIES", "Family", "FamilyJob", "FamilyOption", "build_family", "family", "prepare_family"]

_CLASSIFIER: dict[str, Any] = {"signature_keys": ("preprocess",), "shared_options": ("labels", "top_k")}

FAMILIES: dict[str, Family] = {
    f.command: f
    for f in (
        Family(
            command="resnet50",
            task="image-classification",
            summary="torchvision ResNet50: encoded image bytes in, top-k ImageNet labels out.",
            default_name="resnet50",
            prepare=image_classification.prepare_resnet50,
            render=image_classification.render_family,
            options=image_classification.RESNET50_OPTIONS,
            templates=image_classification.TEMPLATES,
            export=image_classification.RESNET50_EXPORT,
            accuracy=metrics.image_classification(),
            **_CLASSIFIER,
        ),
        Family(
            command="image-classifier",
            title="Any torchvision classifier, or your fine-tuned .pt",
            task="image-classification",
            summary="Any torchvision classifier (torchvision:NAME) or your fine-tuned one (PATH.pt): "
            "encoded image bytes in, top-k labels out; resize/crop/mean/std from the weights' own transforms.",
            default_name="image_classifier",
            prepare=image_classification.prepare_image_classifier,
            render=image_classification.render_family,
            options=image_classification.IMAGE_CLASSIFIER_OPTIONS,
            templates=image_classification.TEMPLATES,
            export=image_classification.IMAGE_CLASSIFIER_EXPORT,
            accuracy=metrics.image_classification(),
            **_CLASSIFIER,
        ),
        Family(
            command="text-classifier",
            task="text-classification",
            summary="A Hugging Face text classifier: text in, top-k labels (id2label) out.",
            default_name="text_classifier",
            prepare=text_classification.prepare_text_classifier,
            render=text_classification.render_family,
            options=text_classification.TEXT_CLASSIFIER_OPTIONS,
            templates=text_classification.TEMPLATES,
            export=text_classification.EXPORT,
            accuracy=metrics.text_classification(),
            **_CLASSIFIER,
        ),
        Family(
            command="token-classifier", task="token-classification", default_name="ner",
            summary="A Hugging Face token classifier (NER): text in, one JSON list of entities per text out, as transformers' "
            "token-classification pipeline returns it (--aggregation none|simple|first|average|max, --ignore-labels).",
            prepare=token_classification.prepare_token_classifier, render=token_classification.render_family,
            options=token_classification.TOKEN_CLASSIFIER_OPTIONS, templates=token_classification.TEMPLATES,
            export=token_classification.EXPORT, signature_keys=("preprocess", "entities"), reference=token_classification.REFERENCE,
            accuracy=metrics.token_classification(),
        ),
        Family(
            command="object-detector",
            title="An Ultralytics YOLO detector (ONNX or .pt)",
            task="object-detection",
            summary="An Ultralytics detector (YOLOv5u/v8/v11/v12 head; --from-onnx or a .pt through Ultralytics' exporter): "
            "encoded image bytes in, boxes in original pixels, scores, class ids and names out, as its predict computes them.",
            default_name="object_detector",
            prepare=object_detection.prepare_object_detector,
            render=object_detection.render_family,
            options=object_detection.OPTIONS,
            templates=object_detection.TEMPLATES,
            signature_keys=("detection",),
            shared_options=("labels",),
            export=object_detection.EXPORT,
            reference=detection_reference.REFERENCE,
            accuracy=metrics.object_detection(),
        ),
        text_embedding.FAMILY,
        text_recognition.FAMILY,
        instance_segmentation.FAMILY,
    )
}


def family(command: str) -> Family:
    found = FAMILIES.get(command)
    if found is None:
        raise UserError(f"unknown model family '{command}'; choose one of {', '.join(sorted(FAMILIES))}")
    return found


def build_family(
    chosen: Family | str,
    options: BuildOptions,
    params: Mapping[str, Any],
    *,
    phases: Phases | None = None,
    log: Log | None = None,
    job: FamilyJob | None = None,
) -> BuildResult:
    """Build ``chosen``'s pipeline into ``options.out``; ``params`` holds the family's own options by dest
    (``from_export`` included). ``phases`` shows progress (quiet when None); ``job``: from ``prepare_family``."""
    chosen = family(chosen) if isinstance(chosen, str) else chosen
    phases = phases or Phases(False)
    job = job or prepare_family(chosen, options, params, phases)

    exported: list[OnnxArtifact] = []

    def export(folder: Path) -> OnnxArtifact:
        phases.note(job.describe)  # a note, not a step: the exporter shows its own timed phases inside
        exported.append(job.export(folder))
        return exported[-1]

    def render(env: Any, source: ModelSource, artifact: OnnxArtifact, versions: Mapping[str, int],
               settings: PipelineSettings | None) -> tuple[RenderedModel, ...]:
        with phases.phase("rendering configs and model.py files"):
            return chosen.render(RenderInputs(env, source, artifact, settings or options.settings, versions, options.labels, params))

    # "family" lets the reference check and bench find the family (and "model" its checkpoint) from the manifest.
    record = {**dict(job.record), "family": chosen.command, **dict(options.record)}
    kwargs = {"log": log} if log is not None else {}
    result = build_pipeline(replace(options, record=record), export, render, pipeline=chosen.task, **kwargs)
    head = exported[-1].signature.metadata.get("head") if exported else None
    return replace(result, head=str(head) if head is not None else None)


def check_shared_options(chosen: Family, options: BuildOptions) -> None:
    """A shared option the family does not read is refused, not silently ignored (--labels for an embedder)."""
    if options.labels is not None and "labels" not in chosen.shared_options:
        raise UserError(f"--labels: build {chosen.command} has no labels; drop --labels")


def prepare_family(chosen: Family, options: BuildOptions, params: Mapping[str, Any], phases: Phases) -> FamilyJob:
    """Check the family's options before anything is staged: --from-export DIR (any family: read, task and
    metadata checked) or the family's own export."""
    check_shared_options(chosen, options)
    from_export = params.get("from_export")
    if from_export is None:
        return chosen.prepare(params, options, phases)
    given = [o.flags[0] for o in chosen.options if o.conflicts_with_export and params.get(o.dest) not in (None, o.default, False)]
    if given:
        raise UserError(f"--from-export builds from an existing export; drop {', '.join(given)}")
    folder = Path(from_export)
    read_task_export(folder, chosen.task, chosen.signature_keys)  # fail before staging anything

    def export(_: Path) -> OnnxArtifact:
        return read_task_export(folder, chosen.task, chosen.signature_keys)

    # The options that still apply to a build from an export (conflicts_with_export=False) are recorded as used.
    kept = {o.dest: _plain(params.get(o.dest, o.default)) for o in chosen.options if not o.conflicts_with_export}
    return FamilyJob(export=export, record={**kept, "model": str(folder.resolve()), "from_export": True},
                     describe=f"reading the export {folder}")


def _plain(value: Any) -> Any:
    """A recorded option value as JSON can hold it (paths as strings)."""
    return str(value) if isinstance(value, Path) else value
