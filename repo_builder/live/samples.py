"""Real sample requests for ``validate --live``, one per model family, keyed by the task the build recorded.

A repository repo-builder built records each pipeline's task in ``repo-builder.json`` (the ensemble's
``settings.pipeline``). ``--live`` then sends that family's real sample (a JPEG photo for image
families, English sentences for text families) instead of synthesized inputs, and holds the answer to
the family's own check. A new family registers here with one ``FamilySample`` entry in ``SAMPLES``:
``rows`` (the values of the ensemble's TYPE_STRING input, one per request row) and ``check`` (the
answer -> a problem in words, or None).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.triton.synthesize import sample_image
from repo_builder.validate.analysis.files import UnsafeFile, read_bounded
from repo_builder.validate.analysis.manifest import MANIFEST_FILE, MAX_MANIFEST_BYTES

if TYPE_CHECKING:
    import numpy as np

Answer = Mapping[str, "np.ndarray[Any, Any]"]
TEXTS = (
    b"The film was a delight from start to finish, and the cast was wonderful.",
    b"Shipping took three weeks and the box arrived damaged.",
    b"Triton serves models from a repository of versioned folders.",
)


@dataclass(frozen=True)
class FamilySample:
    """What ``--live`` sends to one family's ensemble, and how it judges the answer."""

    description: str  # for messages: "a JPEG photo"
    rows: Callable[[], tuple[bytes, ...]]
    check: Callable[[Answer], str | None]


def _jpeg_rows() -> tuple[bytes, ...]:
    return (sample_image(),)


def _text_rows() -> tuple[bytes, ...]:
    return TEXTS


def check_classification(answer: Answer) -> str | None:
    """Top-k class probabilities: each in [0, 1], best first, summing to at most 1 (exactly 1 when k
    covers every class); class ids distinct and non-negative."""
    import numpy as np  # numpy comes with the serve extra, which --live needs

    scores = answer.get("SCORES")
    if scores is None:
        return None  # not a repo-builder classifier's outputs: names are checked against the config
    scores = np.asarray(scores, dtype=np.float64).reshape(len(scores), -1)
    if not np.all(np.isfinite(scores)) or scores.min() < -1e-6 or scores.max() > 1 + 1e-6:
        return f"SCORES are not probabilities (range {scores.min():.4g} .. {scores.max():.4g})"
    if np.any(np.diff(scores, axis=1) > 1e-6):
        return "SCORES are not sorted best first"
    if np.any(scores.sum(axis=1) > 1 + 1e-3):
        return f"class probabilities sum to {scores.sum(axis=1).max():.4f}, more than 1"
    ids = answer.get("CLASS_IDS")
    if ids is not None:
        ids = np.asarray(ids).reshape(len(ids), -1)
        if ids.min() < 0 or any(len(set(row.tolist())) != len(row) for row in ids):
            return "CLASS_IDS are not distinct class indices"
        classes = int(ids.max()) + 1
        if ids.shape[1] == classes and np.any(np.abs(scores.sum(axis=1) - 1) > 1e-3):
            return f"class probabilities over all {classes} classes sum to {scores.sum(axis=1).min():.4f}, not 1"
    return None


SAMPLES: dict[str, FamilySample] = {
    "image-classification": FamilySample("a JPEG photo", _jpeg_rows, check_classification),
    "text-classification": FamilySample("English sentences", _text_rows, check_classification),
}


def family_sample(task: str | None) -> FamilySample | None:
    return SAMPLES.get(task or "")


def recorded_tasks(root: Path) -> dict[str, str]:
    """Ensemble name -> the task its build recorded (``repo-builder.json``); empty when there is none."""
    if not (root / MANIFEST_FILE).is_file():
        return {}
    try:
        data: Any = json.loads(read_bounded(root / MANIFEST_FILE, root, MAX_MANIFEST_BYTES))
    except (UnsafeFile, OSError, ValueError):
        return {}
    models = data.get("models") if isinstance(data, dict) else None
    tasks: dict[str, str] = {}
    for name, entry in (models or {}).items() if isinstance(models, dict) else ():
        if not isinstance(entry, dict) or entry.get("role") != "ensemble":
            continue
        versions = entry.get("versions")
        numbered = sorted((k for k in versions if k.isdigit()), key=int) if isinstance(versions, dict) else []
        latest = versions[numbered[-1]] if numbered and isinstance(versions, dict) else None
        settings = latest.get("settings") if isinstance(latest, dict) else None
        task = settings.get("pipeline") if isinstance(settings, dict) else None
        if isinstance(task, str):
            tasks[str(name)] = task
    return tasks
