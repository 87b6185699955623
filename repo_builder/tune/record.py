"""The search record ``tune`` writes: the ``repo-builder.tune-search`` kind that ``repo-builder report``
draws (docs/report.md), built by ``report.tune_record`` so both agree on it; tune adds what only it knows
(the start, each step's compute time, the confirmation rounds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.report.records import parse_record
from repo_builder.report.tune_record import tune_document as record_document
from repo_builder.tune.knobs import flat_knobs
from repo_builder.tune.search import Measured, Objective, SearchResult, describe


def candidate_ids(measured: Sequence[Measured]) -> list[str]:
    """``c0`` is the starting setting (the repository as it was), then in the order measured."""
    return [f"c{i}" for i in range(len(measured))]


def tune_document(
    repository: Path,
    model: str,
    result: SearchResult,
    objective: Objective,
    *,
    digest: str,
    server_version: str,
    settings: Mapping[str, Any],
    seconds: float,
    confirmation: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    ids = candidate_ids(result.measured)
    candidates = [
        {
            "id": cid,
            "knobs": flat_knobs(m.setting),
            "items_per_s": round(m.items_per_s, 2),
            "p50_ms": round(m.p50_ms, 2),
            "p99_ms": round(m.p99_ms, 2),
            "errors": m.errors,
            "feasible": objective.feasible(m),
            "step_compute_ms": {k: round(v, 3) for k, v in m.step_compute_ms.items()},
            "seconds": round(m.seconds, 2),
            "concurrency": m.concurrency,
            "load_points": [{"concurrency": p.concurrency, "items_per_s": round(p.items_per_s, 2), "p99_ms": round(p.p99_ms, 2),
                             "errors": p.errors} for p in m.load_points],
        }
        for cid, m in zip(ids, result.measured, strict=True)
    ]
    doc = record_document(
        repository, model, candidates, winner=ids[result.measured.index(result.best)],
        p99_budget_ms=objective.p99_budget_ms, settings=settings, server_version=server_version, digest=digest,
    )
    doc.update(baseline=ids[0], search_seconds=round(seconds, 1))
    if confirmation:
        by_setting = {describe(m.setting): cid for cid, m in zip(ids, result.measured, strict=True)}
        entrants = [{"id": by_setting[e["setting"]], **e} if e.get("setting") in by_setting else dict(e)
                    for e in confirmation.get("entrants", ())]  # the report names each finalist by its candidate id
        doc["confirmation"] = {**confirmation, "entrants": entrants}
        parse_record(doc, "tune record", "tune")
    return doc
