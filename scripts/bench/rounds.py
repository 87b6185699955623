"""Figures that hold still: one shape and one verdict for every benchmark figure measured in rounds.

A figure is measured in interleaved rounds (A, B, A, B, ...), one value per round. Its JSON shape:

    {"value": median, "rounds": [...], "spread": [min, max], "target": 0.9, "better": "higher",
     "status": "met" | "missed" | "unsettled" | "not-measured" | "recorded", "note": "..."}

The verdict reads the spread, not the median: a spread entirely on the good side of the target is met, entirely
on the bad side missed, and one that crosses it unsettled (the machine moved the figure across its target). A
figure measured fewer than ``min_rounds`` times has no spread to read and is unsettled too; deterministic
figures (an accuracy difference) pass ``min_rounds=1``. A figure measured with no target is ``recorded``; one that could not be measured is ``not-measured``
with ``value`` null and a note saying why.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from typing import Any

MET, MISSED, UNSETTLED, NOT_MEASURED = "met", "missed", "unsettled", "not-measured"
RECORDED = "recorded"  # measured, with no target of its own (e.g. the wall time another figure is judged against)
STATUSES = (MET, MISSED, UNSETTLED, NOT_MEASURED)


def status_of(rounds: Sequence[float], target: float | None, *, higher_is_better: bool = True, min_rounds: int = 2) -> str:
    """The verdict of a figure's per-round values against its target (see the module docstring)."""
    if not rounds:
        return NOT_MEASURED
    if target is None:
        return RECORDED
    if len(rounds) < min_rounds:
        return UNSETTLED
    low, high = min(rounds), max(rounds)
    good_low, good_high = (low, high) if higher_is_better else (-high, -low)
    bound = target if higher_is_better else -target
    if good_low >= bound:
        return MET
    if good_high < bound:
        return MISSED
    return UNSETTLED


def figure(
    rounds: Sequence[float], target: float | None, *, higher_is_better: bool = True, min_rounds: int = 2, note: str = "", **extra: Any,
) -> dict[str, Any]:
    """A measured figure: its per-round values, median, spread and verdict (``extra`` keys are kept beside)."""
    values = [float(v) for v in rounds]
    status = status_of(values, target, higher_is_better=higher_is_better, min_rounds=min_rounds)
    if status == UNSETTLED and len(values) < min_rounds:
        note = _sentence(note) + f"{len(values)} round(s): no spread to judge (needs {min_rounds})."
    return {
        "value": statistics.median(values) if values else None,
        "rounds": [round(v, 4) for v in values],
        "spread": [round(min(values), 4), round(max(values), 4)] if values else None,
        "target": target,
        "better": "higher" if higher_is_better else "lower",
        "status": status,
        "note": note,
        **extra,
    }


def _sentence(note: str) -> str:
    """``note`` ended as a sentence, ready for the next one ('' stays '')."""
    note = note.strip()
    return "" if not note else note + (" " if note.endswith(".") else ". ")


def not_measured(target: float | None, note: str, *, higher_is_better: bool = True, **extra: Any) -> dict[str, Any]:
    """A figure this run could not measure, with the reason (one line) in ``note``."""
    return {
        "value": None, "rounds": [], "spread": None, "target": target, "better": "higher" if higher_is_better else "lower",
        "status": NOT_MEASURED, "note": note, **extra,
    }


def ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """Per-round ratios of two interleaved series (a zero denominator gives 0: a failed round, not a skipped one)."""
    if len(numerators) != len(denominators):
        raise ValueError(f"{len(numerators)} rounds against {len(denominators)}: interleaved series must pair up")
    return [a / b if b else 0.0 for a, b in zip(numerators, denominators, strict=True)]


def machine_load() -> dict[str, Any]:
    """The machine's load now: the 1, 5 and 15-minute load averages and the cores this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return {"loadavg": [round(x, 2) for x in os.getloadavg()], "cores": cores}
