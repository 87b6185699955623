"""Compare what the served detector returned for one image row with Ultralytics' predict Results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

BOX_PX = 1.0  # the bounds: every box within 1 px, scores within 1e-3, same classes and counts
SCORE = 1e-3


def row_problem(outputs: Mapping[str, np.ndarray], row: int, result: Any, name: str) -> str | None:
    """None when the row matches ``result`` (an ultralytics Results) within the bounds, else why not."""
    count = int(outputs["COUNT"][row, 0])
    expected = result.boxes
    if count != len(expected):
        return f"{name}: {count} detections, predict has {len(expected)}"
    if count == 0:
        return None
    boxes = np.abs(outputs["BOXES"][row, :count] - expected.xyxy.numpy()).max()
    scores = np.abs(outputs["SCORES"][row, :count] - expected.conf.numpy()).max()
    classes = outputs["CLASS_IDS"][row, :count]
    if boxes > BOX_PX or scores > SCORE or not np.array_equal(classes, expected.cls.numpy().astype(np.int64)):
        return f"{name}: boxes off by {boxes:.3g} px, scores by {scores:.3g}, classes equal: {np.array_equal(classes, expected.cls.numpy())}"
    names = [result.names[int(c)] for c in classes]
    if [n.decode() for n in outputs["CLASS_NAMES"][row, :count]] != names:
        return f"{name}: class names differ from the model's"
    return None
