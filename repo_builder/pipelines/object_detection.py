"""Object detection (Ultralytics heads: one-to-many YOLOv5u/v8/v11/v12/26, end-to-end YOLO26/YOLOv10 or nms=True):
encoded image bytes -> letterbox (Python) -> model -> decode + NMS (one-to-many) or score threshold (end-to-end)
+ rescale (Python) -> per image boxes in original pixels, scores, class ids and names.

The steps reproduce Ultralytics' ``predict`` (templates/model/detection_*.py.j2 say how); the build options
are predict's own with its defaults, and every one but --imgsz can be overridden per image row through the
ensemble's optional inputs, so one deployment serves different thresholds. Ultralytics itself (AGPL-3.0) is
needed only to export a ``.pt`` checkpoint; neither this module nor the generated repository imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError
from repo_builder.export.staging import staged_output
from repo_builder.export.ultralytics_detector import (
    DEFAULT_IMGSZ,
    END_TO_END,
    TASKS,
    DetectorOnnx,
    detection_metadata,
    export_ultralytics_checkpoint,
    read_detector_onnx,
    read_labels_file,
    write_detector_export,
)
from repo_builder.pipelines.dali_preprocess import FORMATS, LetterboxPlan, define_letterbox
from repo_builder.pipelines.dali_step import (
    PREPROCESS_OPTION,
    dali_input_tensor,
    render_dali_step,
    serialize,
    wants_dali,
)
from repo_builder.pipelines.family import ExportSettings, FamilyExport, FamilyJob, FamilyOption, RenderInputs
from repo_builder.pipelines.model_step import render_model_step
from repo_builder.pipelines.settings import PipelineSettings, budget_context, step_names
from repo_builder.pipelines.steps import python_step_config, render_ensemble
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source, render_text
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact, Signature, TensorSpec

if TYPE_CHECKING:
    from repo_builder.export.progress import Phases
    from repo_builder.pipelines.assemble import BuildOptions

IMAGE_INPUT = "IMAGE"
SHAPES = "IMAGE_SHAPES"  # carried from preprocess to postprocess: original h, w and letterboxed h, w per image
IMGSZ_INPUT = "IMGSZ"  # optional, to the preprocess step: a smaller square letterbox for one request
OUTPUTS = ("BOXES", "SCORES", "CLASS_IDS", "CLASS_NAMES", "COUNT")
# option -> (optional ensemble input, dtype, dims): per image row; CLASSES rows pad with negative ids.
OPTIONAL_INPUTS = {
    "conf": ("CONF", "float32", [1]),
    "iou": ("IOU", "float32", [1]),
    "max_det": ("MAX_DET", "int32", [1]),
    "classes": ("CLASSES", "int32", [-1]),
    "agnostic": ("AGNOSTIC_NMS", "bool", [1]),
}
TEMPLATES = ("model/detection_preprocess.py.j2", "model/_image_header.py.j2", "model/_request_budget.py.j2", "model/_failure.py.j2", "model/detection_postprocess.py.j2",
             "model/_detection_core.py.j2",
             "model/preprocess_README.md.j2")


@dataclass(frozen=True)
class DetectionChoices:
    """predict's options, with predict's defaults (ultralytics/cfg/default.yaml)."""

    conf: float = 0.25
    iou: float = 0.7
    max_det: int = 300
    classes: tuple[int, ...] | None = None
    agnostic: bool = False

    def __post_init__(self) -> None:
        for flag, value in (("--conf", self.conf), ("--iou", self.iou)):
            if not 0.0 <= value <= 1.0:
                raise UserError(f"{flag} must be between 0 and 1, got {value}")
        if self.max_det < 1:
            raise UserError(f"--max-det must be >= 1, got {self.max_det}")
        if self.classes is not None and (not self.classes or min(self.classes) < 0):
            raise UserError("--classes takes class ids >= 0, comma-separated (e.g. 0,2,5)")


def parse_classes(text: str | None) -> tuple[int, ...] | None:
    if text is None or str(text).strip() == "":
        return None
    try:
        return tuple(int(part) for part in str(text).split(","))
    except ValueError:
        raise UserError(f"--classes {text!r}: expected class ids, comma-separated (e.g. 0,2,5)") from None


def detection_choices(params: Mapping[str, Any]) -> DetectionChoices:
    defaults = DetectionChoices()
    conf, iou, max_det = params.get("conf"), params.get("iou"), params.get("max_det")
    return DetectionChoices(
        conf=float(conf) if conf is not None else defaults.conf,
        iou=float(iou) if iou is not None else defaults.iou,
        max_det=int(max_det) if max_det is not None else defaults.max_det,
        classes=parse_classes(params.get("classes")),
        agnostic=bool(params.get("agnostic")),
    )


def preprocess_context(signature: Signature, detection: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    model_input = signature.tensor(str(detection["input"]))
    return {
        "model_name": names["model"],
        "input_name": IMAGE_INPUT,
        "output_name": model_input.name,
        "shapes_name": SHAPES,
        "imgsz_name": IMGSZ_INPUT,
        "output_dtype": model_input.dtype,
        "imgsz": [int(v) for v in detection["imgsz"]],
        "stride": int(detection["stride"]),
        "rect": bool(detection["rect"]),
    }


def postprocess_context(detection: Mapping[str, Any], choices: DetectionChoices, num_classes: int) -> dict[str, Any]:
    return {
        "raw_name": str(detection["output"]),
        "end_to_end": detection.get("head") == END_TO_END,
        "shapes_name": SHAPES,
        "num_classes": num_classes,
        "labels_file": "labels.txt",
        "conf": choices.conf,
        "iou": choices.iou,
        "max_det": choices.max_det,
        "classes": list(choices.classes) if choices.classes is not None else None,
        "agnostic": choices.agnostic,
        "optional": {option: name for option, (name, _, _) in OPTIONAL_INPUTS.items()},
    }


def optional_tensors() -> list[dict[str, Any]]:
    return [{**ctx.tensor_context(name, dtype, dims), "optional": True} for name, dtype, dims in OPTIONAL_INPUTS.values()]


def imgsz_tensor() -> dict[str, Any]:
    return {**ctx.tensor_context(IMGSZ_INPUT, "int32", [1]), "optional": True}


def output_tensors() -> list[dict[str, Any]]:
    return [ctx.tensor_context("BOXES", "float32", [-1, 4]), ctx.tensor_context("SCORES", "float32", [-1]),
            ctx.tensor_context("CLASS_IDS", "int64", [-1]), ctx.tensor_context("CLASS_NAMES", "object", [-1]),
            ctx.tensor_context("COUNT", "int32", [1])]


def detection_labels(inputs: RenderInputs, num_classes: int) -> tuple[str, ...]:
    if inputs.labels_file is not None:
        return read_labels_file(inputs.labels_file, num_classes)
    labels_path = inputs.artifact.onnx_path.parent / "labels.txt"
    if not labels_path.is_file():
        raise UserError(f"{inputs.origin}: no labels.txt beside it; pass --labels FILE with one class name per line")
    return read_labels_file(labels_path, num_classes)


def render_dali_letterbox(inputs: RenderInputs, detection: Mapping[str, Any], model_input: TensorSpec,
                          settings: PipelineSettings) -> RenderedModel:
    """``--preprocess dali``: the letterbox as a DALI pipeline (model.dali), to the square imgsz a static model
    takes (predict's minimal rectangles vary per image: a DALI batch cannot: docs/performance.md)."""
    if model_input.dtype != "float32":
        raise UserError(f"--preprocess dali writes float32; the model input '{model_input.name}' is {model_input.dtype}: "
                        "use --preprocess python")
    imgsz = [int(v) for v in detection["imgsz"]]
    plan = LetterboxPlan((imgsz[0], imgsz[1]), output=model_input.name, shapes=SHAPES, max_image_pixels=settings.max_image_pixels)
    pipeline = define_letterbox(plan, "gpu", max_batch_size=settings.max_batch_size)
    name = step_names(settings.name)["preprocess"]
    return render_dali_step(
        inputs.env, settings, inputs.versions[name], pipeline=serialize(pipeline),
        outputs=[ctx.signature_tensor(model_input, inputs.artifact.signature.batch_axis), ctx.tensor_context(SHAPES, "int64", [4])],
        comment=f"Preprocessing (DALI): one encoded image per row -> decode (nvJPEG), letterbox to {imgsz[0]}x{imgsz[1]} as "
                "Ultralytics' LetterBox (auto=False), RGB, /255; and the shapes postprocessing rescales with.",
    )


def python_letterbox(inputs: RenderInputs, signature: Signature, detection: Mapping[str, Any], names: Mapping[str, str],
                      model_input: TensorSpec, settings: PipelineSettings) -> RenderedModel:
    """The Python step (default): predict's letterbox, minimal rectangles included."""
    pre_config = python_step_config(
        inputs.env, names["preprocess"], settings,
        inputs=[ctx.tensor_context(IMAGE_INPUT, "object", [1]), imgsz_tensor()],
        outputs=[ctx.signature_tensor(model_input, signature.batch_axis), ctx.tensor_context(SHAPES, "int64", [4])],
        comment="Preprocessing: one encoded image (TYPE_STRING [1]) per row -> letterbox as Ultralytics' predict, RGB, /255.",
        instance_count=settings.decode_instance_count,
    )
    budget = budget_context(settings, settings.decode_instance_count)
    pre_source = render_source(inputs.env, "model/detection_preprocess.py.j2",
                               {**preprocess_context(signature, detection, names), **budget, "max_image_pixels": inputs.settings.max_image_pixels,
                                "pixel_bytes": ctx.DECODE_BYTES_PER_PIXEL["opencv"]})
    limits = ctx.limits_readme_context(names["preprocess"], max_image_pixels=inputs.settings.max_image_pixels, decoder="opencv",
                                       budget=budget)
    pre = RenderedModel(names["preprocess"], "preprocess", inputs.versions[names["preprocess"]], pre_config,
                        {"model.py": pre_source.encode(),
                         "README.md": render_text(inputs.env, "model/preprocess_README.md.j2", limits).encode()})
    return pre


def served_settings(settings: PipelineSettings, max_batch: int | None) -> PipelineSettings:
    """A static or nms=True export takes at most ``max_batch`` images per call: every step batches no more."""
    return replace(settings, max_batch_size=min(settings.max_batch_size, max_batch)) if max_batch else settings


def check_head_options(params: Mapping[str, Any], head: str, origin: str) -> None:
    """An end-to-end head has no NMS left to tune: --iou and --agnostic-nms would be ignored, so they are refused."""
    if head == END_TO_END:
        given = [flag for flag, dest in (("--iou", "iou"), ("--agnostic-nms", "agnostic")) if params.get(dest) not in (None, False)]
        if given:
            raise UserError(f"{origin}: an end-to-end head (no NMS in the pipeline, as predict runs it); drop {', '.join(given)}")


def render_detection(inputs: RenderInputs, choices: DetectionChoices, dali: bool = False) -> tuple[RenderedModel, ...]:
    """Preprocess, model, postprocess and the ensemble clients call (``dali``: a DALI letterbox step)."""
    signature = inputs.artifact.signature
    origin = inputs.origin
    detection = detection_metadata(signature.metadata, origin)
    check_head_options(inputs.params, str(detection["head"]), origin)
    settings = served_settings(inputs.settings, detection["max_batch"])
    names = step_names(settings.name)
    ctx.require_batch_axis(inputs.source.signature, origin)
    num_classes = int(detection["num_classes"])
    if choices.classes is not None and max(choices.classes) >= num_classes:
        raise UserError(f"--classes {','.join(map(str, choices.classes))}: the model has classes 0..{num_classes - 1}")
    labels = detection_labels(inputs, num_classes)
    model_input = signature.tensor(str(detection["input"]))
    raw = signature.tensor(str(detection["output"]))
    if dali:
        pre = render_dali_letterbox(inputs, detection, model_input, settings)
    else:
        pre = python_letterbox(inputs, signature, detection, names, model_input, settings)
    model = render_model_step(inputs.env, inputs.source, settings, inputs.versions[names["model"]], origin)
    raw_tensor = ctx.signature_tensor(raw, signature.batch_axis)
    post_config = python_step_config(
        inputs.env, names["postprocess"], settings,
        inputs=[raw_tensor, ctx.tensor_context(SHAPES, "int64", [4]), *optional_tensors()],
        outputs=output_tensors(),
        comment=("Postprocessing: confidence filter of the end-to-end head (no NMS) and boxes back in original pixels, as predict."
                 if detection["head"] == END_TO_END else
                 "Postprocessing: decode, confidence filter, class-aware NMS and boxes back in original pixels, as predict."),
    )
    post_context = postprocess_context(detection, choices, num_classes)
    if dali:  # the DALI step swaps an image over the limit for a blank; its IMAGE_SHAPES tell postprocess to refuse it
        post_context.update(max_image_pixels=settings.max_image_pixels, formats=FORMATS)
    post_source = render_source(inputs.env, "model/detection_postprocess.py.j2", post_context)
    post = RenderedModel(names["postprocess"], "postprocess", inputs.versions[names["postprocess"]], post_config,
                         {"model.py": post_source.encode(), "labels.txt": ("\n".join(labels) + "\n").encode("utf-8")})
    optional = [name for name, _, _ in OPTIONAL_INPUTS.values()]
    steps = [
        {"model_name": names["preprocess"], "input_map": {IMAGE_INPUT: IMAGE_INPUT} if dali else {IMAGE_INPUT: IMAGE_INPUT, IMGSZ_INPUT: IMGSZ_INPUT},
         "output_map": {model_input.name: model_input.name, SHAPES: SHAPES}},
        {"model_name": names["model"], "input_map": {model_input.name: model_input.name}, "output_map": {raw.name: raw.name}},
        {"model_name": names["postprocess"], "input_map": {raw.name: raw.name, SHAPES: SHAPES, **{n: n for n in optional}},
         "output_map": {n: n for n in OUTPUTS}},
    ]
    ensemble = render_ensemble(
        inputs.env, settings=settings, version=inputs.versions[names["ensemble"]],
        inputs=([dali_input_tensor()] if dali else [ctx.tensor_context(IMAGE_INPUT, "object", [1]), imgsz_tensor()]) + optional_tensors(),
        outputs=output_tensors(), members=(pre, model, post), steps=steps,
        comment="Clients call this: IMAGE (encoded bytes, TYPE_STRING [1]) and optional IMGSZ, CONF, IOU, MAX_DET, CLASSES, "
                "AGNOSTIC_NMS per row -> BOXES (xyxy, original pixels), SCORES, CLASS_IDS, CLASS_NAMES, padded to the "
                "request's largest COUNT.",
    )
    return pre, model, post, ensemble


def render_family(inputs: RenderInputs) -> tuple[RenderedModel, ...]:
    return render_detection(inputs, detection_choices(inputs.params), dali=wants_dali(inputs.params, inputs.settings))


# --- the family record's parts (pipelines/registry.py) ---------------------------------------------------

OPTIONS = (
    FamilyOption(("--model",), "model", "An Ultralytics detection checkpoint (PATH.pt), exported with Ultralytics' own exporter "
                 "(needs the 'detect' extra: Ultralytics is AGPL-3.0). Loading a checkpoint runs it: only files you trust.",
                 kind="path", metavar="PATH.pt"),
    FamilyOption(("--from-onnx",), "from_onnx", "An ONNX that Ultralytics' exporter wrote (dynamic=True for batching); "
                 "class names from its metadata or --labels.", kind="path", metavar="PATH.onnx"),
    FamilyOption(("--imgsz",), "imgsz", "Letterbox size, as predict's imgsz (default 640; a multiple of the stride); per request: "
                 "input IMGSZ, at most this.", kind="int"),
    FamilyOption(("--conf",), "conf", "Confidence threshold (predict's default 0.25); per request: input CONF.", kind="float",
                 conflicts_with_export=False),
    FamilyOption(("--iou",), "iou", "NMS IoU threshold (predict's default 0.7); per request: input IOU.", kind="float",
                 conflicts_with_export=False),
    FamilyOption(("--max-det",), "max_det", "At most this many detections per image (default 300); per request: MAX_DET.",
                 kind="int", conflicts_with_export=False),
    FamilyOption(("--classes",), "classes", "Only these class ids, comma-separated (default: all); per request: CLASSES.",
                 metavar="IDS", conflicts_with_export=False),
    FamilyOption(("--agnostic-nms",), "agnostic", "Class-agnostic NMS; per request: AGNOSTIC_NMS.", kind="flag", default=False,
                 conflicts_with_export=False),
    PREPROCESS_OPTION,
)


def head_record(info: DetectorOnnx, params: Mapping[str, Any], options: BuildOptions) -> dict[str, Any]:
    """What the manifest records of the head (the reference check batches as the ensemble was built), checked."""
    check_head_options(params, info.head, str(params.get("from_onnx")))
    record: dict[str, Any] = {"head": info.head}
    if not info.dynamic_hw and params.get("imgsz") is None and info.imgsz is not None:  # predict runs it at its own size
        record["imgsz"] = info.imgsz[0] if info.imgsz[0] == info.imgsz[1] else list(info.imgsz)
    if info.max_batch is not None:
        settings = options.settings
        if settings.runtime == "tensorrt" and settings.max_batch_size > info.max_batch:
            # The plan is compiled before the steps are rendered: its profile must not go past what the graph takes.
            raise UserError(f"--from-onnx {params.get('from_onnx')}: this export takes at most {info.max_batch} image(s) per call "
                            f"(a static or nms=True export); pass --max-batch-size {info.max_batch} or re-export with dynamic=True")
        record["max_batch_size"] = min(settings.max_batch_size, info.max_batch)
    return record


def prepare_object_detector(params: Mapping[str, Any], options: BuildOptions, phases: Phases, task: str = "detect") -> FamilyJob:
    """--model PATH.pt or --from-onnx PATH.onnx (one of them), checked before anything is staged; ``task``:
    Ultralytics' ("segment" for build instance-segmenter)."""
    choices = detection_choices(params)  # bad thresholds fail now, not after the export
    model, onnx_file = params.get("model"), params.get("from_onnx")
    command = TASKS[task][1]
    if (model is None) == (onnx_file is None):
        raise UserError(f"build {command} needs exactly one of --model PATH.pt, --from-onnx PATH.onnx or --from-export DIR")
    imgsz = params.get("imgsz")
    labels = options.labels
    # The manifest keeps predict's options as built: the reference check passes the same ones to predict.
    record: dict[str, Any] = {"task": TASKS[task][0], "imgsz": imgsz if imgsz is not None else DEFAULT_IMGSZ, **asdict(choices)}
    if choices.classes is not None:
        record["classes"] = list(choices.classes)
    if onnx_file is not None:
        onnx_path = Path(onnx_file)
        info = read_detector_onnx(onnx_path, task)  # its one-line errors before staging
        record.update(head_record(info, params, options))

        def export(folder: Path) -> OnnxArtifact:
            return write_detector_export(folder, onnx_path, imgsz=imgsz, labels=labels, task=task,
                                         source={"onnx": str(onnx_path.resolve())})

        return FamilyJob(export=export, record={**record, "model": str(onnx_path.resolve())}, describe=f"reading {onnx_path.name}")
    checkpoint = Path(str(model))  # not None: exactly one of --model and --from-onnx was checked above
    if not checkpoint.is_file():
        raise UserError(f"--model {checkpoint}: no such file; pass an Ultralytics '{task}' checkpoint (.pt)")

    def export_checkpoint(folder: Path) -> OnnxArtifact:
        return export_ultralytics_checkpoint(folder, checkpoint, imgsz=imgsz, labels=labels, phases=phases, task=task)

    return FamilyJob(export=export_checkpoint, record={**record, "model": str(checkpoint.resolve())},
                     describe=f"exporting {checkpoint.name} with Ultralytics' exporter")


# --- its ``repo-builder export object-detector`` --------------------------------------------------------------

EXPORT_OPTIONS = (
    OPTIONS[0],
    OPTIONS[1],
    OPTIONS[2],
    FamilyOption(("--labels",), "labels", "Class names, one per line (default: the names Ultralytics' exporter wrote).", kind="path"),
)


def run_export(params: Mapping[str, Any], settings: ExportSettings, task: str = "detect") -> OnnxArtifact:
    """An Ultralytics detector (--from-onnx, or a .pt through Ultralytics' exporter): model.onnx, signature.json, labels.txt."""
    model, onnx_file = params.get("model"), params.get("from_onnx")
    if (model is None) == (onnx_file is None):
        raise UserError(f"export {TASKS[task][1]} needs exactly one of --model PATH.pt or --from-onnx PATH.onnx")
    labels = Path(params["labels"]) if params.get("labels") else None
    imgsz = params.get("imgsz")
    if onnx_file is not None:
        read_detector_onnx(Path(onnx_file), task)  # its one-line errors before anything is written
    elif not Path(str(model)).is_file():
        raise UserError(f"--model {model}: no such file; pass an Ultralytics '{task}' checkpoint (.pt)")
    with staged_output(settings.out) as folder:
        if onnx_file is not None:
            artifact = write_detector_export(folder, Path(onnx_file), imgsz=imgsz, labels=labels, task=task,
                                             source={"onnx": str(Path(onnx_file).resolve())})
        else:
            artifact = export_ultralytics_checkpoint(folder, Path(str(model)), imgsz=imgsz, labels=labels, task=task)
    final = settings.out / artifact.onnx_path.name
    return OnnxArtifact(onnx_path=final, signature_path=settings.out / artifact.signature_path.name,
                        signature=artifact.signature, labels=artifact.labels)


EXPORT = FamilyExport(run_export.__doc__ or "", EXPORT_OPTIONS, run_export)
