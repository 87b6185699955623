"""An Ultralytics detector -> model.onnx + signature.json + labels.txt, for ``build object-detector`` (and a
yolo*-seg segmenter, ``task="segment"``, for ``build instance-segmenter``: the same heads with M mask
coefficients per box after the class scores, and a second output, the prototype masks).

Two sources: an ONNX that Ultralytics' exporter wrote (read with ``onnx`` only: no Ultralytics needed), or a
checkpoint (``.pt``) exported through Ultralytics' own exporter, which then must be installed (the
``detect`` extra; Ultralytics is AGPL-3.0, so it is never a dependency of the core install or of a generated
repository). The head is read from the graph (shape inference, then one ONNX Runtime run at the export's size
where a dimension stays symbolic), not from the declared output shape: an export without onnxslim declares its
channel axis symbolic, and an end-to-end head exported with dynamic=True declares ``[batch, ?, anchors]`` for
what is ``[batch, 300, 6]``. Two layouts, as Ultralytics' own ``non_max_suppression`` tells them apart:

- one-to-many ``[batch, 4 + classes, anchors]`` (YOLOv5u/v8/v11/v12, YOLO26 and YOLOv10 by default): the
  postprocess step decodes and runs NMS;
- end-to-end ``[batch, K, 6]`` (x1, y1, x2, y2, score, class: YOLO26/YOLOv10 exported with nms=False, or any
  detector exported with nms=True, whose graph holds NMS): the step applies the score threshold and undoes the
  letterbox, no NMS.
"""

from __future__ import annotations

import ast
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError, require
from repo_builder.export.progress import Phases
from repo_builder.export.signature_build import LABELS_FILE, ONNX_FILE, build_signature, write_labels
from repo_builder.fsutil import sha256_file
from repo_builder.spec import OnnxArtifact, write_signature

TASK = "object-detection"
SEGMENT_TASK = "instance-segmentation"  # build instance-segmenter: a yolo*-seg export (boxes + prototype masks)
# Ultralytics' task name -> (signature.json task, the build command taking it)
TASKS = {"detect": (TASK, "object-detector"), "segment": (SEGMENT_TASK, "instance-segmenter")}
DEFAULT_IMGSZ = 640  # Ultralytics predict's default
# The metadata keys Ultralytics' exporter writes that this family reads.
METADATA_KEYS = ("names", "stride", "imgsz", "task", "end2end", "args", "batch")
ONE_TO_MANY = "one-to-many"
END_TO_END = "end-to-end"
ACCEPTED = ("one input [batch, 3, height, width] and one output [batch, 4 + classes, anchors] (one-to-many head) "
            "or [batch, K, 6] (end-to-end head: YOLO26/YOLOv10 exported with nms=False, or nms=True)")
SEGMENT_ACCEPTED = ("one input [batch, 3, height, width] and two outputs: [batch, 4 + classes + M, anchors] (one-to-many head) "
                    "or [batch, K, 6 + M] (end-to-end head: YOLO26 exported with nms=False), and the prototype masks "
                    "[batch, M, mask height, mask width]")


@dataclass(frozen=True)
class DetectorOnnx:
    """What an Ultralytics detection ONNX says about itself."""

    input_name: str
    output_name: str
    num_classes: int | None  # None: an end-to-end head without names in its metadata (--labels says)
    stride: int
    dynamic_hw: bool  # height and width are symbolic: predict letterboxes to minimal rectangles
    imgsz: tuple[int, int] | None  # the exporter's imgsz (metadata), None when absent
    names: tuple[str, ...]  # class names from the metadata, () when absent
    hw_axes: tuple[str, str] = ("height", "width")  # the symbolic names of the height and width axes
    head: str = ONE_TO_MANY  # or END_TO_END
    output_shape: tuple[int | str, ...] = ()  # as read from the graph (batch symbolic or 1)
    fixed_batch: bool = False  # a static export: batch axis fixed at 1 (declared symbolic in the served copy)
    max_batch: int | None = None  # the most images one model call may take (a static or nms=True export), None: any
    protos_name: str | None = None  # a segmentation export's prototype masks [batch, M, mask h, mask w]
    mask_dim: int = 0  # M: mask coefficients per box after the class scores (0: detection)


def _literal(text: str, key: str, origin: str) -> Any:
    """A metadata value the exporter wrote with str(): parsed as a literal, never evaluated."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise UserError(f"{origin}: metadata '{key}' is not a Python literal ({text[:60]!r}); pass --labels FILE") from None


def _names(value: Any, num_classes: int, origin: str) -> tuple[str, ...]:
    if not isinstance(value, dict) or sorted(value) != list(range(num_classes)):
        raise UserError(f"{origin}: metadata 'names' does not name classes 0..{num_classes - 1}; pass --labels FILE")
    return tuple(str(value[i]) for i in range(num_classes))


def _flag(meta: Mapping[str, str], key: str) -> Any:
    """A metadata value that should be a literal; None when absent or not a literal (it only guides)."""
    try:
        return ast.literal_eval(meta[key]) if key in meta else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _probe_shape(path: Path, input_name: str, size: tuple[int, int], origin: str) -> tuple[int, ...]:
    """The output's real shape from one ONNX Runtime run on a zero image of the export's size."""
    ort = require("onnxruntime", "serve", f"reading the head of {path.name} (its graph leaves the output shape symbolic)")
    import numpy as np  # with onnxruntime

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # one small run: no thread pool worth starting
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        (output,) = session.run(None, {input_name: np.zeros((1, 3, *size), dtype=np.float32)})[:1]
    except Exception as exc:  # ONNX Runtime raises its own kinds for a graph it cannot run
        raise UserError(f"{origin}: ONNX Runtime cannot run it on a 1x3x{size[0]}x{size[1]} image ({type(exc).__name__}); "
                        "re-export it with Ultralytics' exporter") from None
    return tuple(int(d) for d in output.shape)


def _output_shape(model: Any, path: Path, input_name: str, size: tuple[int, int], end2end: bool, origin: str) -> tuple[int | str, ...]:
    """The output shape from ONNX shape inference; one probe run where the dimensions the head is told by stay
    symbolic (the channel axis of an export without onnxslim, an end-to-end head exported with dynamic=True)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph.output[0]
        dims: tuple[int | str, ...] = tuple(d.dim_param or d.dim_value for d in inferred.type.tensor_type.shape.dim)
    except Exception:  # inference is a shortcut only: the probe run below decides
        dims = ()
    if len(dims) == 3 and isinstance(dims[1], int) and dims[1] > 0 and ((isinstance(dims[2], int) and dims[2] > 0) or not end2end):
        return dims
    probed = _probe_shape(path, input_name, size, origin)
    return (dims[0] if dims and isinstance(dims[0], str) else probed[0], *probed[1:])


def read_detector_onnx(path: Path, task: str = "detect") -> DetectorOnnx:
    """Check ``path`` is an Ultralytics detection ONNX (a layout of ACCEPTED; ``task`` "segment": of
    SEGMENT_ACCEPTED) and read its head, classes, stride and imgsz."""
    import onnx  # light (a core dependency), loaded only when reading a model

    origin = str(path)
    segment = task == "segment"
    accepted = SEGMENT_ACCEPTED if segment else ACCEPTED
    if not path.is_file():
        raise UserError(f"--from-onnx {path}: no such file; pass the .onnx Ultralytics' exporter wrote")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError, ValueError ... for a file that is not ONNX
        raise UserError(f"--from-onnx {path}: not an ONNX model ({type(exc).__name__}); pass the .onnx Ultralytics' exporter wrote") from None
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    dims = [[d.dim_param or d.dim_value for d in t.type.tensor_type.shape.dim] for t in (*inputs, *model.graph.output)]
    meta = {p.key: p.value for p in model.metadata_props}
    written = meta.get("task")
    if written is not None and written != task:
        other = f": use build {TASKS[written][1]}" if written in TASKS else ""
        raise UserError(f"{origin}: an Ultralytics '{written}' model; build {TASKS[task][1]} takes '{task}' models{other}")
    outputs = 2 if segment else 1
    if (len(inputs) != 1 or len(model.graph.output) != outputs or len(dims[0]) != 4 or dims[0][1] != 3 or len(dims[1]) != 3
            or (segment and (len(dims[2]) != 4 or not isinstance(dims[2][1], int) or dims[2][1] < 1))):
        found = ", ".join(f"{t.name} {d}" for t, d in zip((*inputs, *model.graph.output), dims, strict=True))
        raise UserError(f"{origin}: found {found}; expected {accepted}")
    mask_dim = int(dims[2][1]) if segment else 0
    batch, _, height, width = dims[0]
    if isinstance(batch, int) and batch != 1:
        raise UserError(f"{origin}: a static export for batches of exactly {batch}; re-export with batch=1 or dynamic=True")
    stride = int(meta.get("stride", "32")) if str(meta.get("stride", "32")).isdigit() else 32
    imgsz = _literal(meta["imgsz"], "imgsz", origin) if "imgsz" in meta else None
    fixed = (int(imgsz[0]), int(imgsz[1])) if isinstance(imgsz, list | tuple) and len(imgsz) == 2 else None
    dynamic_hw = isinstance(height, str) and isinstance(width, str)
    if not dynamic_hw:
        fixed = (int(height), int(width))
    args = _flag(meta, "args")
    nms = isinstance(args, dict) and args.get("nms") is True  # the graph holds NMS (nms=True)
    end2end = _flag(meta, "end2end") is True or nms  # as Ultralytics' backend decides it
    shape = _output_shape(model, path, inputs[0].name, fixed or (DEFAULT_IMGSZ, DEFAULT_IMGSZ), end2end, origin)
    head = END_TO_END if shape[-1] == 6 + mask_dim or end2end else ONE_TO_MANY  # predict's own rule (non_max_suppression)
    output = model.graph.output[0].name
    if head == END_TO_END and (shape[-1] != 6 + mask_dim or not isinstance(shape[1], int)):
        raise UserError(f"{origin}: output '{output}' is {list(shape)}, but the metadata says an end-to-end head; expected {accepted}")
    if head == ONE_TO_MANY and (not isinstance(shape[1], int) or shape[1] < 5 + mask_dim):
        extra = f" + {mask_dim} mask" if segment else ""
        raise UserError(f"{origin}: output '{output}' is {list(shape)}; a detection head has 4 box + at least 1 class{extra} "
                        f"channels; expected {accepted}")
    names_count = len(value) if isinstance(value := _flag(meta, "names"), dict) else None
    num_classes = int(shape[1]) - 4 - mask_dim if head == ONE_TO_MANY else names_count
    names = _names(_literal(meta["names"], "names", origin), num_classes, origin) if "names" in meta and num_classes else ()
    # An nms=True graph unrolls its NMS loop for the export's batch (Ultralytics' backend splits larger ones):
    # rows past it come back empty. A static export takes exactly one image.
    export_batch = _flag(meta, "batch")
    max_batch: int | None = None
    if isinstance(batch, int):
        max_batch = 1
    elif nms:
        max_batch = export_batch if isinstance(export_batch, int) and export_batch > 0 else 1
    axes = (str(height), str(width))
    return DetectorOnnx(inputs[0].name, output, num_classes, stride, dynamic_hw, fixed, names, axes, head=head,
                        output_shape=tuple(shape), fixed_batch=isinstance(batch, int), max_batch=max_batch,
                        protos_name=model.graph.output[1].name if segment else None, mask_dim=mask_dim)


def check_imgsz(imgsz: int | None, info: DetectorOnnx, origin: str) -> tuple[int, int]:
    """The letterbox size: --imgsz (square, a multiple of the stride) or a fixed-size model's own."""
    if not info.dynamic_hw:
        assert info.imgsz is not None
        if imgsz is not None and (imgsz, imgsz) != info.imgsz:
            raise UserError(f"--imgsz {imgsz}: {origin} takes {info.imgsz[0]}x{info.imgsz[1]} only; drop --imgsz or re-export with dynamic=True")
        return info.imgsz
    size = DEFAULT_IMGSZ if imgsz is None else imgsz
    if size < info.stride or size % info.stride:
        raise UserError(f"--imgsz {size}: must be a positive multiple of the model's stride {info.stride}")
    return size, size


def read_labels_file(path: Path, count: int | None) -> tuple[str, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--labels {path}: cannot read it as UTF-8 text ({exc}); write one class name per line") from None
    labels = text.split("\n")
    labels = labels[:-1] if labels and labels[-1] == "" else labels
    if count is None and not labels:
        raise UserError(f"--labels {path}: no names; write one class name per line")
    if count is not None and len(labels) != count:
        raise UserError(f"--labels {path}: {len(labels)} names for a model with {count} classes; write one class name per line")
    return tuple(label.rstrip("\r") for label in labels)


def write_detector_export(folder: Path, onnx_path: Path, *, imgsz: int | None, labels: Path | None,
                          source: Mapping[str, Any], task: str = "detect") -> OnnxArtifact:
    """Copy an Ultralytics detection (``task`` "segment": segmentation) ONNX into ``folder`` as model.onnx with
    signature.json and labels.txt."""
    info = read_detector_onnx(onnx_path, task)
    size = check_imgsz(imgsz, info, str(onnx_path))
    if labels is not None:
        names = read_labels_file(labels, info.num_classes)
    elif info.names:
        names = info.names
    else:
        raise UserError(f"{onnx_path}: no class names in its metadata; pass --labels FILE with one name per line")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / ONNX_FILE
    batched = (info.input_name, info.output_name, *((info.protos_name,) if info.protos_name else ()))
    if info.fixed_batch:
        symbolic_batch_copy(onnx_path, target, batched)
    else:
        shutil.copyfile(onnx_path, target)
    written = write_labels(names, folder / LABELS_FILE)
    axes = {name: {0: "batch"} for name in batched}
    detection = {"imgsz": list(size), "stride": info.stride, "rect": info.dynamic_hw, "num_classes": len(names),
                 "input": info.input_name, "output": info.output_name, "head": info.head, "max_batch": info.max_batch}
    if info.protos_name:
        detection.update(protos=info.protos_name, mask_dim=info.mask_dim)
    metadata: dict[str, Any] = {"task": TASKS[task][0], "detection": detection, "source": dict(source), "source_sha256": sha256_file(onnx_path),
                                "parity_note": "Ultralytics' exporter wrote the ONNX; the reference check compares with its predict"}
    if info.dynamic_hw:
        # TensorRT profiles (compile, --defer-compile): minimal rectangles go down to one stride, squares up to imgsz.
        height_axis, width_axis = info.hw_axes
        metadata["axis_ranges"] = {height_axis: [info.stride, size[0], size[0]], width_axis: [info.stride, size[1], size[1]]}
    signature = build_signature(target, intended_axes=axes, metadata=metadata)
    signature_path = write_signature(signature, folder)
    return OnnxArtifact(onnx_path=target, signature_path=signature_path, signature=signature, labels=written)


def symbolic_batch_copy(source: Path, target: Path, tensors: Sequence[str]) -> None:
    """A static export (batch fixed at 1) with its batch axis declared symbolic, the graph itself unchanged: the
    stock Triton backends batch only a model whose first axis is -1. It is served with max_batch_size 1, so the
    graph still only ever sees one image (its reshapes keep the 1 they were traced with)."""
    import onnx

    model = onnx.load(str(source))
    for value in (*model.graph.input, *model.graph.output):
        if value.name in tensors:
            dim = value.type.tensor_type.shape.dim[0]
            dim.Clear()
            dim.dim_param = "batch"
    onnx.save(model, str(target))


def export_ultralytics_checkpoint(folder: Path, checkpoint: Path, *, imgsz: int | None, labels: Path | None,
                                  phases: Phases | None = None, task: str = "detect") -> OnnxArtifact:
    """Export ``checkpoint`` with Ultralytics' own exporter (dynamic batch/height/width), then as --from-onnx.

    The exporter writes its ONNX beside the checkpoint, so it runs on a copy inside ``folder``."""
    phases = phases or Phases(False)
    work = folder / "ultralytics"
    work.mkdir(parents=True, exist_ok=True)
    # Read when Ultralytics is first imported: its settings file goes inside the stage (unless the user chose a
    # folder), and it never pip-installs a missing requirement or calls home on its own.
    os.environ.setdefault("YOLO_CONFIG_DIR", str(work / "config"))
    os.environ["YOLO_AUTOINSTALL"] = "false"
    os.environ["YOLO_OFFLINE"] = "1"
    require("ultralytics", "detect", "exporting an Ultralytics checkpoint (AGPL-3.0; or pass --from-onnx)")
    from ultralytics import YOLO  # heavy (torch, cv2) and AGPL-3.0: only for this export

    copy = work / "model.pt"
    shutil.copyfile(checkpoint, copy)
    size = DEFAULT_IMGSZ if imgsz is None else imgsz
    with phases.phase(f"exporting {checkpoint.name} with Ultralytics' exporter (imgsz {size}, dynamic)"):
        try:
            model = YOLO(str(copy), task=task)
        except Exception as exc:  # torch.load / Ultralytics raise many kinds for a file that is no checkpoint
            raise UserError(f"--model {checkpoint}: Ultralytics cannot load it ({type(exc).__name__}: {exc})") from None
        if model.task != task:
            raise UserError(f"--model {checkpoint}: an Ultralytics '{model.task}' model; build {TASKS[task][1]} takes '{task}' models")
        exported = Path(model.export(format="onnx", dynamic=True, imgsz=size, simplify=True, verbose=False))
    artifact = write_detector_export(folder, exported, imgsz=size, labels=labels, task=task,
                                     source={"checkpoint": str(checkpoint.resolve()), "exporter": "ultralytics"})
    shutil.rmtree(work, ignore_errors=True)
    return artifact


def detection_metadata(metadata: Mapping[str, Any], origin: str) -> Mapping[str, Any]:
    """signature.json's ``detection`` block, checked."""
    block = metadata.get("detection")
    keys: Sequence[str] = ("imgsz", "stride", "rect", "num_classes", "input", "output")
    if not isinstance(block, dict) or any(k not in block for k in keys):
        raise UserError(f"{origin}: metadata.detection is missing or incomplete; rebuild from the Ultralytics ONNX or checkpoint")
    return {"head": ONE_TO_MANY, "max_batch": None, **block}  # exports written before the head was recorded: one-to-many
