"""Instance segmentation (Ultralytics yolo*-seg: YOLOv8/11/26, one-to-many or YOLO26's end-to-end head):
encoded image bytes -> letterbox (the object detector's step) -> model (head + prototype masks) -> boxes as the
object detector's, plus each object's mask as ``predict(..., retina_masks=True)`` computes it, returned as
COCO uncompressed RLE (templates/model/segmentation_postprocess.py.j2).

Everything but the postprocess step and the MASKS output is the object detector's (pipelines/object_detection.py):
its options, per-request inputs, export and batch caps. Ultralytics is needed only to export a ``.pt``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError
from repo_builder.export.ultralytics_detector import END_TO_END, SEGMENT_TASK, detection_metadata
from repo_builder.pipelines import object_detection as detection
from repo_builder.pipelines import segmentation_reference
from repo_builder.pipelines.family import (
    ExportSettings,
    Family,
    FamilyExport,
    FamilyJob,
    FamilyOption,
    RenderInputs,
)
from repo_builder.pipelines.model_step import render_model_step
from repo_builder.pipelines.settings import budget_context, step_names
from repo_builder.pipelines.steps import python_step_config, render_ensemble
from repo_builder.precision import metrics
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source, render_text
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact

if TYPE_CHECKING:
    from repo_builder.export.progress import Phases
    from repo_builder.pipelines.assemble import BuildOptions

MASKS = "MASKS"  # one JSON document per image: COCO RLE per object, in the order of BOXES
TEMPLATES = ("model/detection_preprocess.py.j2", "model/_image_header.py.j2", "model/segmentation_postprocess.py.j2",
             "model/_detection_core.py.j2", "model/_request_budget.py.j2", "model/_failure.py.j2", "model/preprocess_README.md.j2",
             "model/segmentation_README.md.j2")
# The postprocess step's memory constants (segmentation_postprocess.py.j2), for its README; a test keeps them equal.
MASK_MEMORY = {"mask_copies": 4, "run_bytes": 200, "nms_bytes": 100, "nms_block_bytes": 16 * 2**20}
# A request's boxes may cover this many times --max-image-pixels (the step's MAX_MASK_PIXELS): masks take time by area.
MASK_PIXELS_PER_IMAGE_LIMIT = 4
# The object detector's options but --preprocess: the letterbox is its Python step (DALI untested for masks).
OPTIONS = (*(option for option in detection.OPTIONS if option.dest != "preprocess"),
           FamilyOption(("--max-mask-pixels",), "max_mask_pixels", "At most this many box pixels per request, summed over "
                        "its objects' boxes after NMS (a mask's time follows its box's area); over it, the request is refused "
                        "before any mask [default: 4 x --max-image-pixels].", kind="int", metavar="N",
                        conflicts_with_export=False))


def postprocess_context(block: Mapping[str, Any], choices: detection.DetectionChoices, num_classes: int,
                        max_image_pixels: int = ctx.DEFAULT_MAX_IMAGE_PIXELS, max_mask_pixels: int | None = None) -> dict[str, Any]:
    """The masks step's context; MAX_MASK_PIXELS is --max-mask-pixels, else 4 x --max-image-pixels."""
    limit = MASK_PIXELS_PER_IMAGE_LIMIT * max_image_pixels if max_mask_pixels is None else max_mask_pixels
    return {**detection.postprocess_context(block, choices, num_classes), "protos_name": str(block["protos"]),
            "mask_dim": int(block["mask_dim"]), "max_mask_pixels": limit}


def mask_pixels_option(params: Mapping[str, Any]) -> int | None:
    """--max-mask-pixels as given (None: the default), refused below 1."""
    value = params.get("max_mask_pixels")
    if value is None:
        return None
    if isinstance(value, bool) or int(value) < 1:
        raise UserError(f"--max-mask-pixels must be >= 1, got {value}")
    return int(value)


def output_tensors() -> list[dict[str, Any]]:
    return [*detection.output_tensors(), ctx.tensor_context(MASKS, "object", [1])]


def render_segmentation(inputs: RenderInputs) -> tuple[RenderedModel, ...]:
    """Preprocess (the detector's letterbox), model, the segmentation postprocess and the ensemble."""
    choices = detection.detection_choices(inputs.params)
    signature = inputs.artifact.signature
    origin = inputs.origin
    block = detection_metadata(signature.metadata, origin)
    if "protos" not in block or "mask_dim" not in block:
        raise UserError(f"{origin}: metadata.detection names no prototype masks; export a yolo*-seg model with "
                        "`repo-builder export instance-segmenter`")
    detection.check_head_options(inputs.params, str(block["head"]), origin)
    settings = detection.served_settings(inputs.settings, block["max_batch"])
    names = step_names(settings.name)
    ctx.require_batch_axis(inputs.source.signature, origin)
    num_classes = int(block["num_classes"])
    if choices.classes is not None and max(choices.classes) >= num_classes:
        raise UserError(f"--classes {','.join(map(str, choices.classes))}: the model has classes 0..{num_classes - 1}")
    labels = detection.detection_labels(inputs, num_classes)
    model_input = signature.tensor(str(block["input"]))
    raw, protos = signature.tensor(str(block["output"])), signature.tensor(str(block["protos"]))
    pre = detection.python_letterbox(inputs, signature, block, names, model_input, settings)
    model = render_model_step(inputs.env, inputs.source, settings, inputs.versions[names["model"]], origin)
    post_config = python_step_config(
        inputs.env, names["postprocess"], settings,
        inputs=[ctx.signature_tensor(raw, signature.batch_axis), ctx.signature_tensor(protos, signature.batch_axis),
                ctx.tensor_context(detection.SHAPES, "int64", [4]), *detection.optional_tensors()],
        outputs=output_tensors(),
        comment=("Postprocessing: " + ("confidence filter of the end-to-end head (no NMS)" if block["head"] == END_TO_END
                                       else "decode, confidence filter, class-aware NMS")
                 + ", boxes back in original pixels and each object's mask (COCO RLE at the image's size), as predict "
                   "with retina_masks=True."),
    )
    post_context = {**postprocess_context(block, choices, num_classes, settings.max_image_pixels,
                                          mask_pixels_option(inputs.params)), **budget_context(settings)}
    post_source = render_source(inputs.env, "model/segmentation_postprocess.py.j2", post_context)
    readme = render_text(inputs.env, "model/segmentation_README.md.j2", {**post_context, **MASK_MEMORY, "name": names["postprocess"]})
    post = RenderedModel(names["postprocess"], "postprocess", inputs.versions[names["postprocess"]], post_config,
                         {"model.py": post_source.encode(), "labels.txt": ("\n".join(labels) + "\n").encode("utf-8"),
                          "README.md": readme.encode()})
    optional = [name for name, _, _ in detection.OPTIONAL_INPUTS.values()]
    image, imgsz, shapes = detection.IMAGE_INPUT, detection.IMGSZ_INPUT, detection.SHAPES
    steps = [
        {"model_name": names["preprocess"], "input_map": {image: image, imgsz: imgsz},
         "output_map": {model_input.name: model_input.name, shapes: shapes}},
        {"model_name": names["model"], "input_map": {model_input.name: model_input.name},
         "output_map": {raw.name: raw.name, protos.name: protos.name}},
        {"model_name": names["postprocess"], "input_map": {raw.name: raw.name, protos.name: protos.name, shapes: shapes,
                                                           **{n: n for n in optional}},
         "output_map": {n: n for n in (*detection.OUTPUTS, MASKS)}},
    ]
    ensemble = render_ensemble(
        inputs.env, settings=settings, version=inputs.versions[names["ensemble"]],
        inputs=[ctx.tensor_context(image, "object", [1]), detection.imgsz_tensor(), *detection.optional_tensors()],
        outputs=output_tensors(), members=(pre, model, post), steps=steps,
        comment="Clients call this: IMAGE (encoded bytes, TYPE_STRING [1]) and optional IMGSZ, CONF, IOU, MAX_DET, CLASSES, "
                "AGNOSTIC_NMS per row -> BOXES (xyxy, original pixels), SCORES, CLASS_IDS, CLASS_NAMES, padded to the "
                "request's largest COUNT, and MASKS: one JSON list per image of COCO RLE masks in the order of BOXES.",
    )
    return pre, model, post, ensemble


def prepare_instance_segmenter(params: Mapping[str, Any], options: BuildOptions, phases: Phases) -> FamilyJob:
    return detection.prepare_object_detector(params, options, phases, task="segment")


def run_export(params: Mapping[str, Any], settings: ExportSettings) -> OnnxArtifact:
    """An Ultralytics yolo*-seg model (--from-onnx, or a .pt through Ultralytics' exporter): model.onnx, signature.json, labels.txt."""
    return detection.run_export(params, settings, task="segment")


EXPORT = FamilyExport(run_export.__doc__ or "", detection.EXPORT_OPTIONS, run_export)

FAMILY = Family(
    command="instance-segmenter",
    title="An Ultralytics YOLO segmenter (yolo*-seg, ONNX or .pt)",
    task=SEGMENT_TASK,
    summary="An Ultralytics instance segmenter (yolov8/11/26 -seg; --from-onnx or a .pt through Ultralytics' exporter): "
    "encoded image bytes in; boxes, scores, class ids and names, and per object a COCO RLE mask at the image's size out, "
    "as its predict(retina_masks=True) computes them.",
    default_name="instance_segmenter",
    prepare=prepare_instance_segmenter,
    render=render_segmentation,
    options=OPTIONS,
    templates=TEMPLATES,
    signature_keys=("detection",),
    shared_options=("labels",),
    export=EXPORT,
    reference=segmentation_reference.REFERENCE,
    accuracy=metrics.object_detection(),
)
