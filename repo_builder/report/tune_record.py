"""The search record ``tune`` is to write (kind ``repo-builder.tune-search``, docs/report.md): built here so
that tune and the report agree on it. The Pareto front is computed from the candidates, never passed in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.report.records import TUNE_KIND, TUNE_SCHEMA_VERSION, Candidate, pareto_front, parse_record
from repo_builder.report.run_info import machine_info, repository_digest, utc_now


def tune_document(
    repository: Path,
    model: str,
    candidates: Sequence[Mapping[str, Any]],
    *,
    winner: str | None,
    p99_budget_ms: float | None,
    settings: Mapping[str, Any],
    server_version: str,
    digest: str | None = None,
) -> dict[str, Any]:
    """``candidates``: ``{"id", "knobs", "items_per_s", "p99_ms", "errors"}`` each. Checked as ``report``
    would read it (a ``UserError`` names the key), so tune never writes a record its report refuses."""
    doc: dict[str, Any] = {
        "kind": TUNE_KIND,
        "schema_version": TUNE_SCHEMA_VERSION,
        "repository": str(repository),
        "repository_digest": digest or repository_digest(repository),
        "server_version": server_version,
        "machine": machine_info(),
        "date": utc_now(),
        "settings": dict(settings),
        "model": model,
        "objective": "p99-budget" if p99_budget_ms is not None else "throughput",
        "p99_budget_ms": p99_budget_ms,
        "candidates": [dict(c) for c in candidates],
        "pareto_front": [],
        "winner": winner,
    }
    doc["pareto_front"] = _front(candidates)
    parse_record(doc, "tune record", "tune")  # a wrong type is named here, by its key
    return doc


def _front(candidates: Sequence[Mapping[str, Any]]) -> list[str]:
    try:
        measured = [Candidate(str(c["id"]), (), float(c["items_per_s"]), float(c["p99_ms"]), int(c.get("errors", 0))) for c in candidates]
    except (KeyError, TypeError, ValueError):
        return []  # parse_record then says which key is wrong
    return list(pareto_front(measured))
