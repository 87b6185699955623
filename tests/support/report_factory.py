"""Result documents the report tests build: bench --json and tune search records, as plain dicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repo_builder.report import BENCH_KIND, BENCH_SCHEMA_VERSION, TUNE_KIND, TUNE_SCHEMA_VERSION


def step(model: str, queue_ms: float, compute_ms: float, requests: int = 10) -> dict[str, Any]:
    return {"model": model, "requests": requests, "executions": requests, "mean_batch": 1.0, "queue_ms": queue_ms, "compute_ms": compute_ms, "item_ms": compute_ms}


def level(concurrency: int, items_per_s: float, p99_ms: float, *, steps: tuple[str, ...] = (), errors: int = 0, requests: int = 50) -> dict[str, Any]:
    """One level; ``steps`` names ensemble members, each given distinct times (the last is the slowest)."""
    timed = [step(name, 0.1 * concurrency, 1.0 + i + concurrency, requests) for i, name in enumerate(steps)]
    return {
        "model": "m", "concurrency": concurrency, "requests": requests, "items": requests, "seconds": 1.0,
        "requests_per_s": items_per_s, "items_per_s": items_per_s, "p50_ms": p99_ms / 2, "p90_ms": p99_ms * 0.8,
        "p99_ms": p99_ms, "errors": errors, **({"first_error": "model failed: boom"} if errors else {}),
        "steps": [step("ensemble", 0.0, sum(s["compute_ms"] for s in timed), requests), *timed] if steps else [step("m", 0.1, 2.0, requests)],
        "slowest_step": steps[-1] if steps else "m",
    }


def failed_level(concurrency: int) -> dict[str, Any]:
    return {**level(concurrency, 0.0, 0.0, errors=7, requests=0), "p50_ms": 0.0, "p90_ms": 0.0}


def bench_doc(models: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    if models is None:
        models = [{"model": "pipeline", "levels": [level(1, 100.0, 12.0, steps=("pre", "net")), level(4, 300.0, 25.0, steps=("pre", "net"))]}]
    return {
        "kind": BENCH_KIND, "schema_version": BENCH_SCHEMA_VERSION, "repository": "/repos/demo",
        "repository_digest": "sha256:" + "ab" * 32, "server_version": "2.51.0", "machine": {"cores": 2, "gpus": []},
        "date": "2026-11-25T12:00:00+00:00", "settings": {"concurrency": [1, 4], "seconds": 1.0, "warmup": 0.5},
        "models": models, **extra,
    }


def candidate(cid: str, items_per_s: float, p99_ms: float, errors: int = 0, **knobs: Any) -> dict[str, Any]:
    return {"id": cid, "knobs": knobs or {"instance_count": 1}, "items_per_s": items_per_s, "p99_ms": p99_ms, "errors": errors}


def tune_doc(**extra: Any) -> dict[str, Any]:
    """Five candidates: c0, c2 and c4 form the front (c1 and c3 are dominated), c2 wins under 30 ms."""
    candidates = [
        candidate("c0", 100.0, 10.0, instance_count=1, max_queue_delay_us=0),
        candidate("c1", 90.0, 20.0, instance_count=1, max_queue_delay_us=500),
        candidate("c2", 250.0, 28.0, instance_count=2, preferred_batch_size=[4, 8]),
        candidate("c3", 200.0, 40.0, instance_count=2, **{"step.pre.instance_count": 2}),
        candidate("c4", 400.0, 60.0, instance_count=4),
    ]
    return {
        "kind": TUNE_KIND, "schema_version": TUNE_SCHEMA_VERSION, "repository": "/repos/demo",
        "repository_digest": "sha256:" + "cd" * 32, "server_version": "2.51.0", "machine": {"cores": 2, "gpus": []},
        "date": "2026-11-25T12:00:00+00:00", "settings": {"concurrency": 4, "seconds": 2.0},
        "model": "pipeline", "objective": "p99-budget", "p99_budget_ms": 30.0,
        "candidates": candidates, "pareto_front": ["c0", "c2", "c4"], "winner": "c2", **extra,
    }


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path
