"""Text recognition (OCR, PaddleOCR's PP-OCR): encoded image bytes -> one JSON list of text lines per image
({"text", "score", "box"}), as RapidOCR 1.4.4 computes them with the same three ONNX models.

The served pipeline: the ensemble clients call -> one Python step (``NAME_preprocess``, model/ocr_pipeline.py.j2)
that decodes, runs RapidOCR's pre and post processing, and calls the detector (``NAME_model``, the generic
model step), the angle classifier (``NAME_cls_model``) and the recognizer (``NAME_rec_model``) by BLS, per
image. All three models are rendered by the generic model step: ONNX Runtime, or TensorRT plans left pending
(``--defer-compile``) with profiles derived from the sizes the step sends (``tensorrt_profiles``). Why BLS and not an
ensemble of the models: docs/new-family.md ("text-recognizer"). RapidOCR itself is needed only by the
reference check and ``--from-rapidocr`` (its wheel ships the models); the repository never imports it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.compile import defer_plan
from repo_builder.compile_recipe import RECIPE_FILE, read_recipe
from repo_builder.errors import UserError
from repo_builder.export.staging import staged_output
from repo_builder.export.text_recognizer import (
    CHARACTERS_FILE,
    TASK,
    OcrModels,
    check_models,
    rapidocr_models,
    read_role,
    write_ocr_export,
)
from repo_builder.pipelines.chain import render_chain
from repo_builder.pipelines.family import (
    ExportSettings,
    Family,
    FamilyExport,
    FamilyJob,
    FamilyOption,
    RenderInputs,
)
from repo_builder.pipelines.model_step import render_model_step
from repo_builder.pipelines.ocr_reference import IMAGE_INPUT, LINES_OUTPUT, REFERENCE
from repo_builder.pipelines.settings import ModelSource, PipelineSettings, budget_context, step_names
from repo_builder.pipelines.steps import python_step_config
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source, render_text
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact, Profile, Signature, write_signature

if TYPE_CHECKING:
    from repo_builder.export.progress import Phases
    from repo_builder.pipelines.assemble import BuildOptions

TEMPLATES = ("model/ocr_pipeline.py.j2", "model/_site_packages.py.j2", "model/_request_budget.py.j2", "model/_failure.py.j2", "model/ocr_README.md.j2")
# RapidOCR 1.4.4's config.yaml, the settings the reference runs with; max_crop_aspect is ours (it has no cap).
DEFAULTS: dict[str, Any] = {
    "text_score": 0.5, "min_height": 30, "width_height_ratio": 8, "max_side_len": 2000, "min_side_len": 30,
    "limit_side_len": 736, "thresh": 0.3, "box_thresh": 0.5, "max_boxes": 1000, "unclip_ratio": 1.6,
    "cls_batch": 6, "cls_thresh": 0.9, "rec_batch": 6, "max_crop_aspect": 200,
}


def extra_step_names(name: str) -> dict[str, str]:
    """The classifier and recognizer model steps, beside the generic ``NAME_model`` (the detector)."""
    return {"cls": f"{name}_cls_model", "rec": f"{name}_rec_model"}


def ocr_settings(params: Mapping[str, Any]) -> dict[str, Any]:
    settings = dict(DEFAULTS)
    for key, flag in (("max_boxes", "--max-boxes"), ("max_crop_aspect", "--max-crop-aspect")):
        value = params.get(key)
        if value is not None:
            if isinstance(value, bool) or int(value) < 1:
                raise UserError(f"{flag} must be >= 1, got {value}")
            settings[key] = int(value)
    return settings


def chosen_models(params: Mapping[str, Any]) -> OcrModels:
    """--from-rapidocr, or --det-model and --rec-model (with --cls-model, --dict): one of the two."""
    paths = {key: params.get(key) for key in ("det_model", "cls_model", "rec_model", "dict")}
    if params.get("from_rapidocr"):
        given = [f"--{key.replace('_', '-')}" for key, value in paths.items() if value is not None]
        if given:
            raise UserError(f"--from-rapidocr takes the wheel's models and dictionary; drop {', '.join(given)}")
        return rapidocr_models()
    if paths["det_model"] is None or paths["rec_model"] is None:
        raise UserError("build text-recognizer needs --from-rapidocr, or --det-model and --rec-model (with --cls-model, --dict), "
                        "or --from-export DIR")
    return OcrModels(det=Path(paths["det_model"]), rec=Path(paths["rec_model"]),
                     cls=Path(paths["cls_model"]) if paths["cls_model"] is not None else None,
                     dictionary=Path(paths["dict"]) if paths["dict"] is not None else None)


# The step's fixed model input sizes (ocr_pipeline.py.j2: CLS_SHAPE, REC_SHAPE): a recognizer batch is 48 px high
# and padded to at least 320 px; the classifier's rows are 48 x 192.
CLS_SHAPE = (3, 48, 192)
REC_HEIGHT, REC_MIN_WIDTH = 48, 320
DET_STRIDE = 32  # the detector's input sides are multiples of 32 (RapidOCR's resizes round them)


def _round_up(value: float, step: int) -> int:
    return max(step, math.ceil(value / step) * step)


def det_max_side(s: Mapping[str, Any]) -> int:
    """The longest detector side a TensorRT plan takes: the fitted maximum side, or a letterboxed wide image's
    (about width_height_ratio / 2 times the shorter side's limit), whichever is larger. Inputs beyond it are refused by
    the step (DET_MAX_SIDE): one side over about 4x the other while the shorter is under limit_side_len."""
    return _round_up(max(s["max_side_len"], s["limit_side_len"] * s["width_height_ratio"] / 2), DET_STRIDE)


def rec_widths(s: Mapping[str, Any]) -> tuple[int, int]:
    """The narrowest and widest recognizer batch the step sends: int(48 x max_wh_ratio), max_wh_ratio from
    320 / 48 up to max_crop_aspect (recognize() in ocr_pipeline.py.j2)."""
    aspect = s["max_crop_aspect"]
    return int(REC_HEIGHT * min(REC_MIN_WIDTH / REC_HEIGHT, aspect)), int(REC_HEIGHT * aspect)


def tensorrt_profiles(s: Mapping[str, Any], inputs: Mapping[str, str], max_batch: int) -> dict[str, Profile]:
    """role -> the one profile its plan is built with: every shape the step can send (batch up to the config's
    max_batch_size, which Triton's batcher may fill), opt at a typical size and the step's own batch (the detector's
    at max_batch_size, as compile/profiles.py sets every batch axis it derives: it reads only the sides from here)."""
    limit = min(_round_up(s["limit_side_len"], DET_STRIDE), det_max_side(s))
    low, high = rec_widths(s)
    opt_width = min(max(REC_MIN_WIDTH, low), high)
    shapes = {
        "det": ((1, 3, DET_STRIDE, DET_STRIDE), (max_batch, 3, limit, limit), (max_batch, 3, det_max_side(s), det_max_side(s))),
        "cls": ((1, *CLS_SHAPE), (min(max_batch, s["cls_batch"]), *CLS_SHAPE), (max_batch, *CLS_SHAPE)),
        "rec": ((1, 3, REC_HEIGHT, low), (min(max_batch, s["rec_batch"]), 3, REC_HEIGHT, opt_width), (max_batch, 3, REC_HEIGHT, high)),
    }
    return {role: Profile().add(inputs[role], *shapes[role]) for role in shapes if role in inputs}


def det_axis_ranges(signature: Signature, s: Mapping[str, Any]) -> Signature:
    """The detector's signature with ``metadata.axis_ranges`` for its height and width axes (compile/profiles.py
    reads them), so the generic model step's plan gets the step's sizes."""
    image = signature.inputs[0]
    det = tensorrt_profiles(s, {"det": image.name}, 1)["det"][image.name]
    ranges = {str(image.shape[axis]): [det.min[axis], det.opt[axis], det.max[axis]]
              for axis in (2, 3) if isinstance(image.shape[axis], str)}
    return replace(signature, metadata={**signature.metadata, "axis_ranges": ranges})


def with_det_ranges(artifact: OnnxArtifact, s: Mapping[str, Any]) -> OnnxArtifact:
    """The export with the detector's axis ranges recorded (in signature.json too, for --from-export)."""
    signature = det_axis_ranges(artifact.signature, s)
    write_signature(signature, artifact.signature_path)
    return replace(artifact, signature=signature)


def check_runtime(settings: PipelineSettings, defer_compile: bool = True) -> None:
    if settings.runtime == "tensorrt" and not defer_compile:
        raise UserError("build text-recognizer builds its three TensorRT plans through compile recipes: pass --defer-compile, "
                        "then run 'repo-builder compile-pending REPO' on the GPU machine (or pass --runtime onnxruntime)")


def prepare_text_recognizer(params: Mapping[str, Any], options: BuildOptions, phases: Phases) -> FamilyJob:
    check_runtime(options.settings, options.defer_compile)
    models = chosen_models(params)
    settings = ocr_settings(params)
    check_models(models)  # every one-line refusal before anything is staged

    def export(folder: Path) -> OnnxArtifact:
        return with_det_ranges(write_ocr_export(folder, models, settings), settings)

    # "model": the detector; the reference check reads the other paths (and the settings) from here.
    record = {"task": TASK, "model": str(models.det.resolve()), **models.record(), "ocr": settings,
              "from_rapidocr": bool(params.get("from_rapidocr"))}
    return FamilyJob(export=export, record=record, describe="reading the PP-OCR models")


def _deferred_source(inputs: RenderInputs, role: str, onnx_path: Path, signature: Signature, profile: Profile) -> ModelSource:
    """A TensorRT model step left pending like the detector's: its recipe, with the detector's compile settings
    (precision, builder, workspace) and this model's own profile, in a folder beside the detector's."""
    recipe_file = inputs.source.files.get(RECIPE_FILE)
    if not isinstance(recipe_file, Path):
        raise UserError("build text-recognizer --runtime tensorrt needs --defer-compile (then 'repo-builder compile-pending REPO')")
    settings = replace(read_recipe(recipe_file).settings, profiles=(profile,))
    folder = recipe_file.parent.parent / f"tensorrt_{role}"
    defer_plan(onnx_path, signature, folder, settings)
    return ModelSource(signature, {p.name: p for p in sorted(folder.iterdir()) if p.is_file()}, default_model_filename="model.plan")


def _extra_model(inputs: RenderInputs, role: str, settings: PipelineSettings, name: str, s: Mapping[str, Any]) -> RenderedModel | None:
    found = read_role(inputs.artifact, role)
    if found is None:
        return None
    onnx_path, signature = found
    if settings.runtime == "tensorrt":
        profile = tensorrt_profiles(s, {role: signature.inputs[0].name}, settings.max_batch_size)[role]
        source = _deferred_source(inputs, role, onnx_path, signature, profile)
    else:
        source = ModelSource(signature, {"model.onnx": onnx_path})
    # The generic model step under its own name (NAME_<role>_model), at the detector's version: they are built together.
    step = render_model_step(inputs.env, source, replace(settings, name=f"{settings.name}_{role}"),
                             inputs.versions[step_names(settings.name)["model"]], str(onnx_path.parent / "signature.json"))
    assert step.name == name
    return step


def render_family(inputs: RenderInputs) -> tuple[RenderedModel, ...]:
    settings = inputs.settings
    signature = inputs.artifact.signature
    ocr = signature.metadata.get("ocr")
    if not isinstance(ocr, dict) or "rec" not in ocr:
        raise UserError(f"{inputs.origin}: metadata.ocr is missing; re-run 'repo-builder export text-recognizer'")
    names = step_names(settings.name)
    extra = extra_step_names(settings.name)
    s = {**DEFAULTS, **dict(ocr.get("settings", {}))}
    cls = _extra_model(inputs, "cls", settings, extra["cls"], s)
    rec = _extra_model(inputs, "rec", settings, extra["rec"], s)
    rec_found = read_role(inputs.artifact, "rec")
    if rec is None or rec_found is None:
        raise UserError(f"{inputs.origin}: no rec/model.onnx beside it; re-run 'repo-builder export text-recognizer'")
    classes = rec_found[1].outputs[0].shape[-1]  # export checked it is a number (the characters' count)
    characters = inputs.artifact.onnx_path.parent / str(ocr["rec"]["characters"])
    context = {
        "input_name": IMAGE_INPUT, "output_name": LINES_OUTPUT, "max_image_pixels": settings.max_image_pixels,
        "det_model": names["model"], "det_input": ocr["det"]["input"], "det_output": ocr["det"]["output"],
        "cls_model": extra["cls"] if cls is not None else None,
        "cls_input": ocr["cls"]["input"] if cls is not None else None,
        "cls_output": ocr["cls"]["output"] if cls is not None else None,
        "rec_model": extra["rec"], "rec_input": ocr["rec"]["input"], "rec_output": ocr["rec"]["output"],
        "model_max_batch": settings.max_batch_size, "s": s, "runtime": settings.runtime,
        # TensorRT: the plans' profile bounds the detector input (the step refuses larger); ONNX Runtime takes any size.
        "det_max_side": det_max_side(s) if settings.runtime == "tensorrt" else None,
        **budget_context(settings, settings.decode_instance_count),
    }
    lines = ctx.tensor_context(LINES_OUTPUT, "object", [1])
    image = ctx.tensor_context(IMAGE_INPUT, "object", [1])
    config = python_step_config(
        inputs.env, names["preprocess"], settings, inputs=[image], outputs=[lines],
        comment=f"The OCR pipeline: one encoded image per row -> RapidOCR's pre/post processing around {names['model']} "
                f"(detector){', ' + extra['cls'] + ' (angle classifier)' if cls is not None else ''} and {extra['rec']} "
                "(recognizer), called per image (BLS) -> one JSON list of lines per row.",
        instance_count=settings.decode_instance_count,
    )
    readme = render_text(inputs.env, "model/ocr_README.md.j2", {**context, "name": settings.name, "cls": cls is not None,
                                                                  "pipeline": names["preprocess"], "classes": classes}).encode()
    pre = RenderedModel(names["preprocess"], "preprocess", inputs.versions[names["preprocess"]], config, {
        "model.py": render_source(inputs.env, "model/ocr_pipeline.py.j2", context).encode(),
        CHARACTERS_FILE: characters, "README.md": readme})
    steps = [{"model_name": names["preprocess"], "input_map": {IMAGE_INPUT: IMAGE_INPUT}, "output_map": {LINES_OUTPUT: LINES_OUTPUT}}]
    # The detector is the generic model step; the ensemble has one step (the BLS caller), render_chain adds the model.
    pre_out, det, ensemble = render_chain(
        inputs.env, inputs.source, settings, inputs.versions, inputs.origin, pre=pre, post=None,
        ensemble_inputs=[image], ensemble_outputs=[lines], steps=steps,
        comment="Clients call this: IMAGE (encoded bytes, TYPE_STRING [1]) -> LINES (one JSON list of "
                '{"text", "score", "box"} per image, in reading order, as RapidOCR gives them).',
        ensemble_files={"README.md": readme})
    return (pre_out, det, *((cls,) if cls is not None else ()), rec, ensemble)


# --- the family record's parts (pipelines/registry.py) ---------------------------------------------------

MODEL_OPTIONS = (
    FamilyOption(("--from-rapidocr",), "from_rapidocr", "The detector, angle classifier, recognizer and dictionary the installed "
                 "rapidocr-onnxruntime wheel ships (PP-OCRv4 det/rec, mobile v2.0 cls; Apache-2.0).", kind="flag", default=False),
    FamilyOption(("--det-model",), "det_model", "The PP-OCR text detector (DB), ONNX from paddle2onnx.", kind="path", metavar="PATH.onnx"),
    FamilyOption(("--cls-model",), "cls_model", "The PP-OCR angle classifier, ONNX (optional: without it no 180-degree flips).",
                 kind="path", metavar="PATH.onnx"),
    FamilyOption(("--rec-model",), "rec_model", "The PP-OCR recognizer (CTC), ONNX.", kind="path", metavar="PATH.onnx"),
    FamilyOption(("--dict",), "dict", "The recognizer's character dictionary, one per line (default: the rec model's metadata "
                 "'character', as RapidOCR reads it).", kind="path", metavar="FILE"),
)
LIMIT_OPTIONS = (
    FamilyOption(("--max-boxes",), "max_boxes", "At most this many detector contours examined per image (default 1000, "
                 "RapidOCR's max_candidates).", kind="int"),
    FamilyOption(("--max-crop-aspect",), "max_crop_aspect", "A recognizer batch is at most this many times as wide as high "
                 "(default 200: 9600 px); wider crops are squeezed.", kind="int"),
)
OPTIONS = MODEL_OPTIONS + LIMIT_OPTIONS


def run_export(params: Mapping[str, Any], settings: ExportSettings) -> OnnxArtifact:
    """PP-OCR ONNX models (--from-rapidocr, or --det-model, --rec-model, --cls-model, --dict): the detector as model.onnx,
    cls/ and rec/ beside it, the recognizer's characters."""
    models = chosen_models(params)
    ocr = ocr_settings(params)
    check_models(models)
    with staged_output(settings.out) as folder:
        artifact = with_det_ranges(write_ocr_export(folder, models, ocr), ocr)
    return OnnxArtifact(onnx_path=settings.out / artifact.onnx_path.name, signature_path=settings.out / artifact.signature_path.name,
                        signature=artifact.signature)


EXPORT = FamilyExport(run_export.__doc__ or "", OPTIONS, run_export)

FAMILY = Family(
    command="text-recognizer", task=TASK, default_name="ocr",
    title="PP-OCR text recognition (OCR), as RapidOCR reads text",
    summary="PP-OCR ONNX models (--from-rapidocr, or --det-model/--cls-model/--rec-model/--dict): encoded image bytes in, "
            "one JSON list of text lines (text, score, box) per image out, as RapidOCR() reads them.",
    prepare=prepare_text_recognizer, render=render_family, options=OPTIONS, templates=TEMPLATES, export=EXPORT,
    signature_keys=("ocr",), reference=REFERENCE,
)
