"""Image classification: encoded image bytes -> preprocess (Python) -> model -> top-k postprocess (Python).

The pipeline input is TYPE_STRING with dims [1]: one encoded image (JPEG/PNG/WebP) per batch row.
TYPE_UINT8 [-1] would carry the same bytes, but the dynamic batcher only joins requests whose shapes are
equal, and encoded images almost never have the same byte length: with [-1] nothing would batch. A
string element has shape [1] whatever its length, so any images batch together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError
from repo_builder.export.resnet50 import export_resnet50, resnet50_choice
from repo_builder.export.torchvision_classifier import (
    ModelChoice,
    check_arch,
    export_torchvision_classifier,
    parse_model,
)
from repo_builder.pipelines.classification import (
    classifier_logits,
    family_labels,
    render_classification_pipeline,
)
from repo_builder.pipelines.dali_preprocess import IMAGE_SIZE, classifier_plan, define_classifier
from repo_builder.pipelines.dali_step import (
    PREPROCESS_OPTION,
    dali_input_tensor,
    render_dali_step,
    serialize,
    wants_dali,
)
from repo_builder.pipelines.family import ExportSettings, FamilyExport, FamilyJob, FamilyOption, RenderInputs
from repo_builder.pipelines.nvcf_assets import asset_parameters
from repo_builder.pipelines.nvcf_options import NVCF_OPTIONS
from repo_builder.pipelines.settings import ModelSource, PipelineSettings, budget_context, step_names
from repo_builder.pipelines.steps import preprocess_metadata, render_preprocess_step
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source, render_text
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact, Signature

if TYPE_CHECKING:
    from repo_builder.export.progress import Phases
    from repo_builder.pipelines.assemble import BuildOptions

IMAGE_INPUT = "IMAGE"
ASSET_ENSEMBLE_COMMENT = ("Clients call this: IMAGE (encoded bytes) or IMAGE_ASSET (NVCF asset ids), exactly one, TYPE_STRING [1] "
                          "-> LABELS, SCORES, CLASS_IDS (top-k).")


def render_image_pipeline(
    env: Any,
    source: ModelSource,
    onnx_signature: Signature,
    labels: Sequence[str],
    settings: PipelineSettings,
    versions: Mapping[str, int],
    origin: str = "signature.json",
    dali: bool = False,
    resize_with: str = "pillow",
) -> tuple[RenderedModel, ...]:
    """Render the four models; ``versions`` maps each model name to the version folder to write (``dali``: the
    preprocess step is a DALI pipeline instead of Python; ``resize_with``: the Python step's resizer)."""
    names = step_names(settings.name)
    sig = source.signature
    ctx.require_batch_axis(sig, origin)
    if len(sig.inputs) != 1:
        raise UserError(f"{origin}: an image classifier takes one input, found {', '.join(t.name for t in sig.inputs)}")
    model_input = sig.inputs[0]
    preprocess = preprocess_metadata(onnx_signature, origin, "image transforms")
    pre = ctx.image_preprocess_context(
        names["preprocess"], names["model"], model_input, preprocess, draft_margin=settings.draft_margin, origin=origin,
        resize_with=resize_with, max_image_pixels=settings.max_image_pixels,
    )
    dims = list(model_input.triton_dims(sig.batch_axis))
    crop_h, crop_w = pre["crop"]
    want = [3, crop_h, crop_w] if pre["layout"] == "NCHW" else [crop_h, crop_w, 3]
    if len(dims) != 3 or any(d not in (-1, w) for d, w in zip(dims, want, strict=True)):
        raise UserError(f"{origin}: input '{model_input.name}' has dims {dims}, which a {pre['layout']} {crop_h}x{crop_w} crop cannot fill")
    logits = classifier_logits(sig, labels, origin)

    if dali:
        pre_model = _dali_preprocess(env, settings, versions[names["preprocess"]], pre, want, model_input.dtype)
        return render_classification_pipeline(
            env, source, settings, versions, origin, preprocess=pre_model, pipeline_input=IMAGE_INPUT,
            model_inputs=[model_input.name], logits=logits, labels=labels, ensemble_input=dali_input_tensor(),
            max_image_pixels=settings.max_image_pixels, resize=int(pre["resize"]),
            comment="Clients call this: IMAGE (the encoded image's bytes, TYPE_UINT8 [-1]) -> LABELS, SCORES, CLASS_IDS (top-k).",
        )
    budget = budget_context(settings, settings.decode_instance_count)
    pre_model = render_preprocess_step(
        env,
        settings,
        versions[names["preprocess"]],
        pipeline_input=IMAGE_INPUT,
        outputs=[ctx.tensor_context(model_input.name, model_input.dtype, want)],
        comment="Preprocessing: one encoded image (TYPE_STRING [1]) per row -> resize, center-crop, normalize.",
        files={"model.py": render_source(env, "model/image_preprocess.py.j2", {**pre, **budget, "nvcf": settings.nvcf is not None}).encode(),
               "README.md": render_text(env, "model/preprocess_README.md.j2", ctx.limits_readme_context(
                   names["preprocess"], max_image_pixels=settings.max_image_pixels, budget=budget)).encode()},
        instance_count=settings.decode_instance_count,
        asset_parameters=asset_parameters(settings.nvcf, IMAGE_INPUT),
    )
    return render_classification_pipeline(
        env,
        source,
        settings,
        versions,
        origin,
        preprocess=pre_model,
        pipeline_input=IMAGE_INPUT,
        model_inputs=[model_input.name],
        logits=logits,
        labels=labels,
        comment=ASSET_ENSEMBLE_COMMENT if settings.nvcf else "Clients call this: IMAGE (encoded bytes, TYPE_STRING [1]) -> LABELS, SCORES, CLASS_IDS (top-k).",
    )


def _dali_preprocess(env: Any, settings: PipelineSettings, version: int, pre: Mapping[str, Any], dims: list[int],
                     dtype: str) -> RenderedModel:
    """The DALI step: the GPU flavour of the same graph tests/pipelines/test_dali_pipeline.py checks on the CPU."""
    if dtype != "float32":
        raise UserError(f"--preprocess dali writes float32; the model's input '{pre['output_name']}' is {dtype}: use --preprocess python")
    pipeline = define_classifier(classifier_plan(dict(pre)), "gpu", max_batch_size=settings.max_batch_size)
    return render_dali_step(
        env, settings, version, pipeline=serialize(pipeline),
        outputs=[ctx.tensor_context(str(pre["output_name"]), dtype, dims), ctx.tensor_context(IMAGE_SIZE, "int64", [2])],
        comment="Preprocessing (DALI): one encoded image per row -> decode (nvJPEG), resize, center-crop, normalize, as torchvision; "
                "and the header's (h, w): over --max-image-pixels the image is not decoded, postprocessing refuses it.",
    )


# --- the family records' parts (pipelines/registry.py) ---------------------------------------------------

TEMPLATES = ("model/image_preprocess.py.j2", "model/_nvcf_assets.py.j2", "model/_request_budget.py.j2", "model/_failure.py.j2", "model/classification_postprocess.py.j2",
             "model/preprocess_README.md.j2")
RESIZERS = ("pillow", "torch")
RESIZE_WITH_OPTION = FamilyOption(
    ("--resize-with",), "resize_with",
    "The Python step's resizer. pillow (default): Pillow's antialiased resize of the crop's region; torch: torch's "
    "antialiased uint8 resize (vectorised, about 4x faster, within one grey level of Pillow's), which needs torch in "
    "the server's Python environment (bilinear and bicubic models).",
    default="pillow", kind="choice", choices=RESIZERS, conflicts_with_export=False,
)
WEIGHTS_HELP = "default: the architecture's pretrained DEFAULT weights (torch.hub download cache); random (seeded); or a state_dict file."
RESNET50_OPTIONS = (
    FamilyOption(("--weights",), "weights", "imagenet (torchvision's IMAGENET1K_V2, from its download cache), random (seeded), or a state_dict file.",
                 default="imagenet", metavar="imagenet|random|PATH", conflicts_with_export=False),
    PREPROCESS_OPTION,
    RESIZE_WITH_OPTION,
    *NVCF_OPTIONS,
)
IMAGE_CLASSIFIER_OPTIONS = (
    FamilyOption(("--model",), "model", "torchvision:NAME (any torchvision classification model, e.g. torchvision:efficientnet_b0), "
                 "or PATH.pt: your fine-tuned model (a whole pickled model: only files you trust, loading runs it; or a state_dict with --arch).",
                 metavar="torchvision:NAME|PATH"),
    FamilyOption(("--weights",), "weights", WEIGHTS_HELP + " Only with torchvision:NAME.", default="default", metavar="default|random|PATH"),
    FamilyOption(("--arch",), "arch", "The torchvision architecture of a --model PATH state_dict (and whose transforms a pickled model uses).",
                 metavar="NAME"),
    PREPROCESS_OPTION,
    RESIZE_WITH_OPTION,
    *NVCF_OPTIONS,
)


def resizer(params: Mapping[str, Any], dali: bool) -> str:
    """``--resize-with``, refused where it means nothing: a DALI step resizes on the GPU."""
    choice = str(params.get("resize_with") or "pillow")
    if choice not in RESIZERS:
        raise UserError(f"--resize-with {choice!r}: expected one of {', '.join(RESIZERS)}")
    if dali and choice != "pillow":
        raise UserError(f"--resize-with {choice} is for the Python step; --preprocess dali resizes on the GPU: drop one of them")
    return choice


def render_family(inputs: RenderInputs) -> tuple[RenderedModel, ...]:
    labels = family_labels(inputs)
    dali = wants_dali(inputs.params, inputs.settings)
    return render_image_pipeline(inputs.env, inputs.source, inputs.artifact.signature, labels, inputs.settings, inputs.versions,
                                 origin=inputs.origin, dali=dali, resize_with=resizer(inputs.params, dali))


def prepare_resnet50(params: Mapping[str, Any], options: BuildOptions, phases: Phases) -> FamilyJob:
    """``build resnet50``: the alias of ``image-classifier --model torchvision:resnet50`` (imagenet = default)."""
    resizer(params, dali=params.get("preprocess") == "dali")  # a contradiction is refused before the export
    weights = str(params.get("weights") or "imagenet")
    return _classifier_job(resnet50_choice(weights), options, phases, record={"model": "resnet50", "weights": weights})


def prepare_image_classifier(params: Mapping[str, Any], options: BuildOptions, phases: Phases) -> FamilyJob:
    resizer(params, dali=params.get("preprocess") == "dali")  # a contradiction is refused before the export
    model = params.get("model")
    if not model:
        raise UserError("build image-classifier needs --model torchvision:NAME (e.g. torchvision:efficientnet_b0) or --model PATH.pt, or --from-export DIR")
    choice = parse_model(str(model), weights=str(params.get("weights") or "default"), arch=params.get("arch"))
    if choice.arch is not None:
        check_arch(choice.arch)  # before anything is staged: a typo'd name fails at once
    record = {"model": str(model) if choice.path is None else str(choice.path.resolve()), "weights": choice.weights, "arch": choice.arch}
    return _classifier_job(choice, options, phases, record=record)


def _classifier_job(choice: ModelChoice, options: BuildOptions, phases: Phases, record: Mapping[str, Any]) -> FamilyJob:
    def export(folder: Path) -> OnnxArtifact:
        return export_torchvision_classifier(folder, choice, check_parity=options.check_parity, phases=phases)

    return FamilyJob(export=export, record=record, describe=f"exporting {choice.name} to ONNX")


# --- their ``repo-builder export`` subcommands ---------------------------------------------------------------

DYNAMIC_HW = FamilyOption(("--dynamic-hw",), "dynamic_hw", "Make height and width dynamic too (default: the weights' crop size).", kind="flag")
RESNET50_EXPORT_OPTIONS = (
    FamilyOption(("--weights",), "weights", "torchvision IMAGENET1K_V2 (download cache), seeded random weights, or a state_dict file.",
                 default="imagenet", metavar="imagenet|random|PATH"),
    FamilyOption(("--dynamic-hw",), "dynamic_hw", "Make height and width dynamic too (default: fixed 224x224).", kind="flag"),
)
IMAGE_CLASSIFIER_EXPORT_OPTIONS = (
    FamilyOption(("--model",), "model", "torchvision:NAME (any torchvision classification model) or PATH.pt: a whole pickled model "
                 "(only files you trust: loading runs it) or a state_dict with --arch.", metavar="torchvision:NAME|PATH", required=True),
    FamilyOption(("--weights",), "weights", "torchvision:NAME only: its pretrained DEFAULT weights (download cache), seeded random weights, "
                 "or a state_dict file.", default="default", metavar="default|random|PATH"),
    FamilyOption(("--arch",), "arch", "The torchvision architecture of a --model PATH state_dict.", metavar="NAME"),
    DYNAMIC_HW,
)


def run_resnet50_export(params: Mapping[str, Any], settings: ExportSettings) -> OnnxArtifact:
    """torchvision ResNet50: NCHW float32 input, dynamic batch axis."""
    return export_resnet50(settings.out, weights=str(params.get("weights") or "imagenet"), dynamic_hw=bool(params.get("dynamic_hw")),
                           **settings.kwargs())


def run_image_classifier_export(params: Mapping[str, Any], settings: ExportSettings) -> OnnxArtifact:
    """Any torchvision image classifier: NCHW float32 input, dynamic batch axis, the weights' own transforms recorded."""
    choice = parse_model(str(params["model"]), weights=str(params.get("weights") or "default"), arch=params.get("arch"))
    return export_torchvision_classifier(settings.out, choice, dynamic_hw=bool(params.get("dynamic_hw")), **settings.kwargs())


RESNET50_EXPORT = FamilyExport(run_resnet50_export.__doc__ or "", RESNET50_EXPORT_OPTIONS, run_resnet50_export)
IMAGE_CLASSIFIER_EXPORT = FamilyExport(run_image_classifier_export.__doc__ or "", IMAGE_CLASSIFIER_EXPORT_OPTIONS, run_image_classifier_export)
