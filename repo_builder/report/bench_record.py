"""The JSON ``bench --json`` writes: today's figures (``repository``, ``models[].levels[]``) unchanged,
with the record's kind, schema version and what was measured beside them (docs/report.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.report.records import BENCH_KIND, BENCH_SCHEMA_VERSION
from repo_builder.report.run_info import machine_info, repository_digest, utc_now


def bench_document(
    repository: Path, models: Sequence[Mapping[str, Any]], *, settings: Mapping[str, Any], server_version: str, digest: str | None = None
) -> dict[str, Any]:
    """``models`` are ``ModelBench.to_json()`` values; ``digest`` is taken before serving when given
    (the Python stub adds ``__pycache__`` while it runs; the digest leaves those out either way)."""
    return {
        "kind": BENCH_KIND,
        "schema_version": BENCH_SCHEMA_VERSION,
        "repository": str(repository),
        "repository_digest": digest or repository_digest(repository),
        "server_version": server_version,
        "machine": machine_info(),
        "date": utc_now(),
        "settings": dict(settings),
        "models": list(models),
    }
