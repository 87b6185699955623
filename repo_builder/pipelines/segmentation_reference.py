"""instance-segmenter's reference check and bench reference: Ultralytics' own
``YOLO(model).predict(..., retina_masks=True)`` on the same images with the build's thresholds, compared per
image as the object detector's (same count, boxes within 1 px, scores within 1e-3, same classes and names),
and per object its mask: the served RLE decoded, IoU with predict's mask at least MASK_IOU.

Ultralytics (AGPL-3.0, the ``detect`` extra) and OpenCV are imported inside the functions, as for detection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.pipelines.detection_reference import (
    decode,
    image_request,
    load_yolo,
    predict_kwargs,
    reference_images,
    row_problem,
    served_beside_predict,
)
from repo_builder.pipelines.family import FamilyReference, InProcess, ReferenceReport, ReferenceRun

MASK_IOU = 0.99


def rle_mask(rle: Mapping[str, Any]) -> Any:
    """A COCO uncompressed RLE ({"size": [h, w], "counts": [...]}, column-major, 0s first) -> bool [h, w]."""
    import numpy as np

    height, width = (int(v) for v in rle["size"])
    counts = np.asarray(rle["counts"], dtype=np.int64)
    if counts.sum() != height * width or (counts < 0).any():
        raise ValueError(f"RLE counts sum to {int(counts.sum())}, not {height}x{width}")
    flat = np.repeat(np.arange(len(counts)) % 2 == 1, counts)
    return flat.reshape(width, height).T


def mask_ious(document: bytes | str, expected: Any) -> list[float]:
    """IoU of each served mask (one JSON document) with predict's (``expected``: [N, h, w]), in order."""
    import numpy as np

    served = json.loads(document)
    if len(served) != len(expected):
        return [0.0] * max(len(served), len(expected))
    ious = []
    for rle, want in zip(served, expected, strict=True):
        got, want = rle_mask(rle), np.asarray(want) > 0
        if got.shape != want.shape:
            ious.append(0.0)
            continue
        union = int(np.logical_or(got, want).sum())
        ious.append(float(np.logical_and(got, want).sum()) / union if union else 1.0)
    return ious


def row_mask_problem(outputs: Mapping[str, Any], row: int, result: Any, name: str) -> tuple[str | None, float]:
    """(why the row's masks differ from predict's, or None; the lowest mask IoU, 1.0 without objects)."""
    count = int(outputs["COUNT"][row][0])
    if count == 0:
        return None, 1.0
    expected = result.masks.data.numpy()
    ious = mask_ious(outputs["MASKS"][row][0], expected)
    lowest = min(ious)
    if lowest < MASK_IOU:
        return f"{name}: mask IoU {lowest:.4f} with predict's (object {ious.index(lowest)} of {count})", lowest
    return None, lowest


def check(run: ReferenceRun) -> ReferenceReport:
    """As the object detector's check (half the images one per request, half in batches), masks included."""
    yolo = load_yolo(run.model, task="segment")
    kwargs = {**predict_kwargs(run.settings), "retina_masks": True}
    images = reference_images(max(run.minimum_cases, 1))
    failures: list[str] = []
    compared, detections, lowest = 0, 0, 1.0
    for outputs, row, result, name in served_beside_predict(run, yolo, images, kwargs):
        compared += 1
        detections += len(result.boxes)
        problem = row_problem(outputs, row, result, name)
        if problem is None:
            problem, iou = row_mask_problem(outputs, row, result, name)
            lowest = min(lowest, iou)
        if problem:
            failures.append(problem)
    return ReferenceReport(
        family="instance-segmenter", cases=compared, passed=not failures and compared == len(images),
        figures={"images": float(compared), "mismatched_images": float(len(failures)), "detections": float(detections),
                 "min_mask_iou": lowest},
        bounds={"mismatched_images": "== 0 (same count, boxes within 1 px, scores within 1e-3, same classes, "
                                     f"every mask IoU >= {MASK_IOU})"},
        failures=tuple(failures[:5]),
    )


def load(model: Path, threads: int) -> InProcess:
    """YOLO(model).predict(retina_masks=True) in this process (ONNX Runtime for an .onnx, PyTorch for a .pt)."""
    yolo = load_yolo(model, task="segment")

    def run(items: Sequence[bytes]) -> Any:
        return yolo.predict([decode(item) for item in items], verbose=False, retina_masks=True)

    return InProcess(run=run, threads=threads)


REFERENCE = FamilyReference(check=check, items=reference_images, request=image_request, load=load, unit="images")
