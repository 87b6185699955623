"""Each family's gate metric on answers shaped as its ensemble returns them (one row per item)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from repo_builder.pipelines.registry import FAMILIES
from repo_builder.precision import metrics


def _classes(*rows: list[int]) -> list[dict[str, np.ndarray]]:
    return [{"CLASS_IDS": np.array(r, dtype=np.int64)} for r in rows]


def test_classification_counts_top1_agreement_and_top5_overlap_when_answers_differ() -> None:
    float_answers = _classes([1, 2, 3, 4, 5], [7, 8, 9, 10, 11])
    reduced = _classes([1, 3, 2, 4, 6], [8, 7, 9, 10, 11])
    figures = metrics.classification(float_answers, reduced)
    assert figures["top1_agreement"] == 0.5  # the first agrees, the second swapped its top two
    assert figures["top5_overlap"] == pytest.approx((4 / 5 + 5 / 5) / 2)


def test_classification_overlap_is_over_top_k_when_the_ensemble_returns_fewer_than_five() -> None:
    assert metrics.classification(_classes([3, 4]), _classes([4, 9]))["top5_overlap"] == 0.5


def test_embedding_gives_mean_and_worst_cosine_when_one_vector_turns() -> None:
    float_answers = [{"EMBEDDING": np.array([1.0, 0.0])}, {"EMBEDDING": np.array([0.0, 2.0])}]
    reduced = [{"EMBEDDING": np.array([2.0, 0.0])}, {"EMBEDDING": np.array([1.0, 1.0])}]
    figures = metrics.embedding(float_answers, reduced)
    assert figures["worst_cosine"] == pytest.approx(np.sqrt(0.5))
    assert figures["mean_cosine"] == pytest.approx((1 + np.sqrt(0.5)) / 2)


def _entities(*rows: list[tuple[int, int, str]]) -> list[dict[str, np.ndarray]]:
    return [{"entities": np.array([json.dumps([{"start": s, "end": e, "entity_group": g, "score": 0.9, "word": "x"}
                                               for s, e, g in row]).encode()], dtype=object)} for row in rows]


def test_entities_f1_needs_exact_span_and_label_when_compared() -> None:
    float_answers = _entities([(0, 5, "PER"), (10, 15, "LOC")], [])
    reduced = _entities([(0, 5, "PER"), (10, 16, "LOC")], [(3, 4, "ORG")])
    figures = metrics.entities(float_answers, reduced)
    # 1 of 3 found is right, 1 of 2 expected found: P 1/3, R 1/2.
    assert figures["entity_precision"] == pytest.approx(1 / 3) and figures["entity_recall"] == 0.5
    assert figures["entity_f1"] == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert metrics.entities(_entities([]), _entities([]))["entity_f1"] == 1.0


def _detections(*rows: list[tuple[list[float], int]], slots: int = 4) -> list[dict[str, np.ndarray]]:
    answers = []
    for row in rows:
        boxes = np.zeros((slots, 4), np.float32)
        classes = np.full(slots, -1, np.int64)
        for i, (box, cls) in enumerate(row):
            boxes[i], classes[i] = box, cls
        answers.append({"BOXES": boxes, "CLASS_IDS": classes, "COUNT": np.array([len(row)], np.int32)})
    return answers


def test_detection_matches_boxes_one_to_one_at_iou_half_when_same_class() -> None:
    float_answers = _detections([([0, 0, 10, 10], 1), ([20, 20, 30, 30], 2)])
    # The first box shifted by 1 px (IoU 81/119), the second one given another class, and one extra box.
    reduced = _detections([([1, 1, 11, 11], 1), ([20, 20, 30, 30], 3), ([50, 50, 60, 60], 0)])
    figures = metrics.detection(float_answers, reduced)
    assert figures["matched_boxes"] == pytest.approx(1 / 3)
    assert figures["mean_iou"] == pytest.approx(81 / 119)
    assert metrics.detection(_detections([]), _detections([]))["matched_boxes"] == 1.0


def test_every_family_declares_a_gate_metric_whose_headline_its_compare_reports() -> None:
    answers = {
        "top1_agreement": _classes([1, 2]), "mean_cosine": [{"EMBEDDING": np.ones(3)}],
        "entity_f1": _entities([(0, 1, "PER")]), "matched_boxes": _detections([([0, 0, 1, 1], 0)]),
    }
    # Families with no metric yet: --precision is refused for them in one line (next test).
    ungated = {"text-recognizer"}
    for family in FAMILIES.values():
        metric = family.accuracy
        assert (metric is None) == (family.command in ungated), family.command
        if metric is None:
            continue
        same = answers[metric.headline]
        assert metric.compare(same, same)[metric.headline] == pytest.approx(1.0), family.command
        assert 0.5 < metric.threshold < 1.0 and metric.unit in ("images", "texts")
        request = metric.request(["é"] if metric.unit == "texts" else [b"\x89PNG"])
        assert all(array.shape == (1, 1) and array.dtype == object for array in request.values())


def test_build_refuses_reduced_precision_in_one_line_when_the_family_declares_no_metric() -> None:
    from repo_builder.errors import UserError
    from repo_builder.pipelines.build_request import BuildRequest, precision_plan

    with pytest.raises(UserError, match=r"^--precision int8: build text-recognizer declares no accuracy metric to gate it; keep fp32$"):
        precision_plan(BuildRequest(family="text-recognizer", out=Path("unused"), precision="int8"), FAMILIES["text-recognizer"])
