"""The search record ``tune`` writes: the ``repo-builder.tune-search`` kind that ``repo-builder report``
draws (every candidate with its knobs and figures, the Pareto front, the winner; docs/report.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.report.records import TUNE_KIND, TUNE_SCHEMA_VERSION, Candidate, pareto_front
from repo_builder.report.run_info import machine_info, utc_now
from repo_builder.tune.knobs import flat_knobs
from repo_builder.tune.search import Measured, Objective, SearchResult


def candidate_ids(measured: Sequence[Measured]) -> list[str]:
    """``c0`` is the starting setting (the repository as it was), then in the order measured."""
    return [f"c{i}" for i in range(len(measured))]


def front_of(measured: Sequence[Measured]) -> tuple[str, ...]:
    ids = candidate_ids(measured)
    return pareto_front(
        [Candidate(id=i, knobs=(), items_per_s=m.items_per_s, p99_ms=m.p99_ms, errors=m.errors) for i, m in zip(ids, measured, strict=True)]
    )


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
    winner = ids[result.measured.index(result.best)]
    return {
        "kind": TUNE_KIND,
        "schema_version": TUNE_SCHEMA_VERSION,
        "repository": str(repository),
        "repository_digest": digest,
        "server_version": server_version,
        "machine": machine_info(),
        "date": utc_now(),
        "settings": dict(settings),
        "model": model,
        "objective": objective.name,
        "p99_budget_ms": objective.p99_budget_ms,
        "candidates": [
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
            }
            for cid, m in zip(ids, result.measured, strict=True)
        ],
        "pareto_front": list(front_of(result.measured)),
        "baseline": ids[0],
        "winner": winner,
        "search_seconds": round(seconds, 1),
        **({"confirmation": dict(confirmation)} if confirmation else {}),
    }
