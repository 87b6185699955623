"""Each family's task metric: the reduced-precision pipeline's answers against the float pipeline's.

Every function takes the served answers item by item (one mapping of output name -> that item's row per
input, float first, reduced second, same order) and returns the figures, the headline among them. They
compare the two pipelines with each other, not with ground truth: the gate asks "does reduced precision
change what clients get", which needs no labels. numpy is imported inside: family records import this module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from repo_builder.precision.gate import AccuracyMetric

Answer = Mapping[str, Any]  # one item's outputs: name -> that item's row


def _ids(answer: Answer, name: str) -> list[int]:
    import numpy as np

    return [int(v) for v in np.asarray(answer[name]).reshape(-1)]


def classification(float_answers: Sequence[Answer], reduced: Sequence[Answer]) -> dict[str, float]:
    """Top-1 agreement (the headline) and top-5 overlap (the share of the float top-5 the reduced top-5
    keeps, over the top-k the ensemble returns when that is under 5)."""
    agree, overlap = [], []
    for a, b in zip(float_answers, reduced, strict=True):
        ids_a, ids_b = _ids(a, "CLASS_IDS"), _ids(b, "CLASS_IDS")
        agree.append(float(bool(ids_a) and bool(ids_b) and ids_a[0] == ids_b[0]))
        k = min(5, len(ids_a)) or 1
        overlap.append(len(set(ids_a[:5]) & set(ids_b[:5])) / k)
    return {"top1_agreement": _mean(agree), "top5_overlap": _mean(overlap)}


def embedding(float_answers: Sequence[Answer], reduced: Sequence[Answer], output: str = "EMBEDDING") -> dict[str, float]:
    """Cosine of each reduced embedding with the float one: mean (the headline) and worst."""
    import numpy as np

    cosines = []
    for a, b in zip(float_answers, reduced, strict=True):
        x = np.asarray(a[output], dtype=np.float64).reshape(-1)
        y = np.asarray(b[output], dtype=np.float64).reshape(-1)
        norm = float(np.linalg.norm(x) * np.linalg.norm(y))
        cosines.append(float(x @ y) / norm if norm > 0 else float(np.array_equal(x, y)))
    return {"mean_cosine": _mean(cosines), "worst_cosine": min(cosines) if cosines else 0.0}


def _entities(answer: Answer, output: str) -> set[tuple[int, int, str]]:
    import numpy as np

    raw = np.asarray(answer[output]).reshape(-1)[0]
    rows = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
    return {(int(e["start"]), int(e["end"]), str(e.get("entity_group", e.get("entity")))) for e in rows}


def entities(float_answers: Sequence[Answer], reduced: Sequence[Answer], output: str = "entities") -> dict[str, float]:
    """Entity-level F1 (span and label both exact) of the reduced pipeline's entities against the float
    pipeline's, over every item (micro); precision and recall beside it. No entities on either side: 1.0."""

    both = found = expected = 0
    for a, b in zip(float_answers, reduced, strict=True):
        x, y = _entities(a, output), _entities(b, output)
        both, found, expected = both + len(x & y), found + len(y), expected + len(x)
    precision = both / found if found else 1.0
    recall = both / expected if expected else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"entity_f1": f1, "entity_precision": precision, "entity_recall": recall}


def _iou(a: Any, b: Any) -> float:

    left, top = max(a[0], b[0]), max(a[1], b[1])
    right, bottom = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, right - left) * max(0.0, bottom - top)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / union) if union > 0 else 0.0


def _boxes(answer: Answer) -> tuple[Any, Any]:
    import numpy as np

    count = int(np.asarray(answer["COUNT"]).reshape(-1)[0])
    boxes = np.asarray(answer["BOXES"], dtype=np.float64).reshape(-1, 4)[:count]
    classes = np.asarray(answer["CLASS_IDS"]).reshape(-1)[:count]
    return boxes, classes


def detection(float_answers: Sequence[Answer], reduced: Sequence[Answer], iou: float = 0.5) -> dict[str, float]:
    """Boxes matched one to one (same class, IoU >= 0.5, greedily in the float pipeline's order, which is by
    score): the matched share of the larger side (the headline: a lost box and an extra box both count) and
    the mean IoU of the matched pairs. No boxes on either side: 1.0."""

    matched = total = 0
    ious: list[float] = []
    for a, b in zip(float_answers, reduced, strict=True):
        boxes_a, classes_a = _boxes(a)
        boxes_b, classes_b = _boxes(b)
        free = list(range(len(boxes_b)))
        for i in range(len(boxes_a)):
            best, best_iou = None, iou
            for j in free:
                if classes_b[j] == classes_a[i]:
                    value = _iou(boxes_a[i], boxes_b[j])
                    if value >= best_iou:
                        best, best_iou = j, value
            if best is not None:
                free.remove(best)
                matched += 1
                ious.append(best_iou)
        total += max(len(boxes_a), len(boxes_b))
    return {"matched_boxes": matched / total if total else 1.0, "mean_iou": _mean(ious) if ious else 1.0}


def _mean(values: Sequence[float]) -> float:

    return float(sum(values) / len(values)) if values else 0.0


def _items_request(name: str) -> Any:
    def request(items: Sequence[Any]) -> dict[str, Any]:
        import numpy as np

        return {name: np.array([[i.encode("utf-8") if isinstance(i, str) else i] for i in items], dtype=np.object_)}

    return request


# What each family is gated on (Family.accuracy): unit of data, the ensemble's input, metric, headline, threshold.
def image_classification() -> AccuracyMetric:
    return AccuracyMetric("images", _items_request("IMAGE"), classification, "top1_agreement", 0.98,
                          "top-1 agreement with the fp32 pipeline, top-5 overlap beside it")


def text_classification() -> AccuracyMetric:
    return AccuracyMetric("texts", _items_request("TEXT"), classification, "top1_agreement", 0.98,
                          "top-1 agreement with the fp32 pipeline, top-5 overlap beside it")


def text_embedding() -> AccuracyMetric:
    return AccuracyMetric("texts", _items_request("TEXT"), embedding, "mean_cosine", 0.98,
                          "mean cosine with the fp32 pipeline's embeddings, the worst beside it")


def token_classification() -> AccuracyMetric:
    return AccuracyMetric("texts", _items_request("TEXT"), entities, "entity_f1", 0.95,
                          "entity-level F1 (exact span and label) against the fp32 pipeline's entities")


def object_detection() -> AccuracyMetric:
    return AccuracyMetric("images", _items_request("IMAGE"), detection, "matched_boxes", 0.95,
                          "boxes matched one to one at IoU 0.5 (same class) with the fp32 pipeline's, mean IoU beside it")
