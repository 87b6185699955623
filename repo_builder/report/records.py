"""The result files a report reads, checked key by key into frozen dataclasses.

Two kinds, each with its own schema version (``docs/report.md`` documents both):

- ``repo-builder.bench``: what ``bench --json`` writes. ``models[].levels[]`` with ``items_per_s``,
  ``p99_ms`` and ``steps`` are the keys bench has always written; ``kind``, ``schema_version`` and the
  run's description (repository digest, server version, machine, date, settings) sit beside them.
- ``repo-builder.tune-search``: the record ``tune`` will write: every candidate with its knobs and
  measured figures, the Pareto front and the winner.

A file of another kind or version, or with a key of the wrong type, is one ``UserError`` naming the file
and the key (exit 2). Light imports only: reading a record needs no plotting library.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from repo_builder.errors import UserError

BENCH_KIND = "repo-builder.bench"
BENCH_SCHEMA_VERSION = 1
TUNE_KIND = "repo-builder.tune-search"
TUNE_SCHEMA_VERSION = 1
KINDS: dict[str, int] = {BENCH_KIND: BENCH_SCHEMA_VERSION, TUNE_KIND: TUNE_SCHEMA_VERSION}
MAX_RECORD_BYTES = 32 << 20  # a bench of many models is kilobytes; more is not a record


@dataclass(frozen=True)
class RunInfo:
    """What was measured, where and how: the page states it above the charts."""

    repository: str
    repository_digest: str = ""
    server_version: str = ""
    cores: int | None = None
    gpus: tuple[str, ...] = ()
    date: str = ""
    settings: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class StepTime:
    """One model's share of a request at one level (the ensemble itself comes first)."""

    model: str
    requests: int
    queue_ms: float
    compute_ms: float
    mean_batch: float


@dataclass(frozen=True)
class Level:
    concurrency: int
    requests: int
    items_per_s: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    errors: int
    first_error: str
    steps: tuple[StepTime, ...]
    slowest_step: str | None

    @property
    def answered(self) -> bool:
        """A level with no answer has no figure to draw (its p99 of 0 would be a lie)."""
        return self.requests > 0


@dataclass(frozen=True)
class ModelRun:
    model: str
    levels: tuple[Level, ...]


@dataclass(frozen=True)
class BenchRecord:
    label: str
    source: str  # the file it came from, as given
    info: RunInfo
    models: tuple[ModelRun, ...]


@dataclass(frozen=True)
class Candidate:
    """One configuration tune measured: its knobs (name -> value as text) and what it served."""

    id: str
    knobs: tuple[tuple[str, str], ...]
    items_per_s: float
    p99_ms: float
    errors: int


@dataclass(frozen=True)
class Entrant:
    """One finalist of tune's confirmation rounds: its figure in each round and the medians that ranked it."""

    candidate: str  # its candidate id ("" when the record does not name it)
    setting: str
    items_per_s: tuple[float, ...]
    median_items_per_s: float
    median_p99_ms: float
    concurrency: int | None
    kept_budget: bool


@dataclass(frozen=True)
class Confirmation:
    """The finalists measured again in interleaved rounds; the winner is the best median there."""

    rounds: int
    ratio: float  # the winner's median over the start's
    kept_start: bool  # the gain was below the noise: the start won
    entrants: tuple[Entrant, ...]


@dataclass(frozen=True)
class TuneRecord:
    label: str
    source: str
    info: RunInfo
    model: str
    objective: str
    p99_budget_ms: float | None
    candidates: tuple[Candidate, ...]
    pareto_front: tuple[str, ...]
    winner: str | None
    confirmation: Confirmation | None = None


Record = BenchRecord | TuneRecord


class _File:
    """Typed access to one parsed file; every failure names the file and the key's path."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, problem: str) -> NoReturn:
        raise UserError(f"{self.source}: key '{key}' {problem}; write it with 'repo-builder bench --json' (or 'tune'), see docs/report.md")

    def obj(self, value: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            self.fail(key, f"must be an object, got {_kind(value)}")
        return value

    def items(self, parent: Mapping[str, Any], key: str, where: str) -> list[Any]:
        value = self.need(parent, key, where)
        if not isinstance(value, list):
            self.fail(_join(where, key), f"must be a list, got {_kind(value)}")
        return value

    def need(self, parent: Mapping[str, Any], key: str, where: str) -> Any:
        if key not in parent:
            self.fail(_join(where, key), "is missing")
        return parent[key]

    def text(self, parent: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
        value = parent.get(key, default) if default is not None else self.need(parent, key, where)
        if not isinstance(value, str):
            self.fail(_join(where, key), f"must be a string, got {_kind(value)}")
        return value

    def number(self, parent: Mapping[str, Any], key: str, where: str, default: float | None = None) -> float:
        value = parent.get(key, default) if default is not None else self.need(parent, key, where)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            self.fail(_join(where, key), f"must be a number >= 0, got {_kind(value)}")
        return float(value)

    def count(self, parent: Mapping[str, Any], key: str, where: str, default: int | None = None) -> int:
        value = parent.get(key, default) if default is not None else self.need(parent, key, where)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(_join(where, key), f"must be a whole number >= 0, got {_kind(value)}")
        return value


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _kind(value: Any) -> str:
    text = json.dumps(value)[:40] if isinstance(value, str | int | float | bool) or value is None else type(value).__name__
    return {"dict": "an object", "list": "a list"}.get(text, text)


def _scalar_text(value: Any) -> str:
    """A setting or knob as the page shows it (lists joined by commas)."""
    if isinstance(value, list):
        return ",".join(_scalar_text(v) for v in value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return str(value)


def _pairs(f: _File, parent: Mapping[str, Any], key: str, where: str) -> tuple[tuple[str, str], ...]:
    """An object of settings/knobs whose values are scalars or lists of scalars."""
    value = f.obj(parent.get(key, {}), _join(where, key))
    for name, item in value.items():
        flat = item if isinstance(item, list) else [item]
        if not all(v is None or isinstance(v, str | int | float | bool) for v in flat):
            f.fail(_join(where, f"{key}.{name}"), f"must be a number, string, boolean or a list of them, got {_kind(item)}")
    return tuple((str(name), _scalar_text(item)) for name, item in value.items())


def _run_info(f: _File, doc: Mapping[str, Any]) -> RunInfo:
    machine = f.obj(doc.get("machine", {}), "machine")
    gpus = f.items(machine, "gpus", "machine") if "gpus" in machine else []
    if not all(isinstance(g, str) for g in gpus):
        f.fail("machine.gpus", "must be a list of GPU names")
    return RunInfo(
        repository=f.text(doc, "repository", ""),
        repository_digest=f.text(doc, "repository_digest", "", default=""),
        server_version=f.text(doc, "server_version", "", default=""),
        cores=f.count(machine, "cores", "machine") if "cores" in machine else None,
        gpus=tuple(gpus),
        date=f.text(doc, "date", "", default=""),
        settings=_pairs(f, doc, "settings", ""),
    )


def _step(f: _File, raw: Any, where: str) -> StepTime:
    step = f.obj(raw, where)
    return StepTime(
        model=f.text(step, "model", where),
        requests=f.count(step, "requests", where, default=0),
        queue_ms=f.number(step, "queue_ms", where),
        compute_ms=f.number(step, "compute_ms", where),
        mean_batch=f.number(step, "mean_batch", where, default=0.0),
    )


def _level(f: _File, raw: Any, where: str) -> Level:
    level = f.obj(raw, where)
    concurrency = f.count(level, "concurrency", where)
    if concurrency < 1:
        f.fail(_join(where, "concurrency"), "must be >= 1")
    slowest = level.get("slowest_step")
    if slowest is not None and not isinstance(slowest, str):
        f.fail(_join(where, "slowest_step"), f"must be a model name or null, got {_kind(slowest)}")
    return Level(
        concurrency=concurrency,
        requests=f.count(level, "requests", where),
        items_per_s=f.number(level, "items_per_s", where),
        p50_ms=f.number(level, "p50_ms", where, default=0.0),
        p90_ms=f.number(level, "p90_ms", where, default=0.0),
        p99_ms=f.number(level, "p99_ms", where),
        errors=f.count(level, "errors", where, default=0),
        first_error=f.text(level, "first_error", where, default=""),
        steps=tuple(_step(f, s, f"{where}.steps[{i}]") for i, s in enumerate(f.items(level, "steps", where))),
        slowest_step=slowest,
    )


def _bench(f: _File, doc: Mapping[str, Any], label: str) -> BenchRecord:
    models = []
    for i, raw in enumerate(f.items(doc, "models", "")):
        where = f"models[{i}]"
        model = f.obj(raw, where)
        levels = f.items(model, "levels", where)
        models.append(ModelRun(f.text(model, "model", where), tuple(_level(f, lv, f"{where}.levels[{j}]") for j, lv in enumerate(levels))))
    return BenchRecord(label=label, source=f.source, info=_run_info(f, doc), models=tuple(models))


def _candidate(f: _File, raw: Any, where: str) -> Candidate:
    cand = f.obj(raw, where)
    return Candidate(
        id=f.text(cand, "id", where),
        knobs=_pairs(f, cand, "knobs", where),
        items_per_s=f.number(cand, "items_per_s", where),
        p99_ms=f.number(cand, "p99_ms", where),
        errors=f.count(cand, "errors", where, default=0),
    )


def pareto_front(candidates: Sequence[Candidate]) -> tuple[str, ...]:
    """Ids of the candidates no other beats on both throughput (higher) and p99 (lower), by p99.

    Candidates with errors are out: a configuration that drops requests is not a trade-off.
    """
    ok = [c for c in candidates if c.errors == 0]

    def dominated(c: Candidate) -> bool:
        return any(
            o.items_per_s >= c.items_per_s and o.p99_ms <= c.p99_ms and (o.items_per_s > c.items_per_s or o.p99_ms < c.p99_ms)
            for o in ok
        )

    return tuple(c.id for c in sorted(ok, key=lambda c: (c.p99_ms, -c.items_per_s)) if not dominated(c))


def _numbers(f: _File, parent: Mapping[str, Any], key: str, where: str) -> tuple[float, ...]:
    return tuple(f.number({key: v}, key, f"{where}.{key}[{i}]") for i, v in enumerate(f.items(parent, key, where)))


def _confirmation(f: _File, doc: Mapping[str, Any], ids: Sequence[str]) -> Confirmation | None:
    """The optional ``confirmation`` tune writes; an entrant's ``id``, when given, must be a candidate's."""
    if doc.get("confirmation") is None:
        return None
    raw = f.obj(doc["confirmation"], "confirmation")
    entrants = []
    for i, item in enumerate(f.items(raw, "entrants", "confirmation") if "entrants" in raw else []):
        where = f"confirmation.entrants[{i}]"
        e = f.obj(item, where)
        cid = f.text(e, "id", where, default="")
        if cid and cid not in ids:
            f.fail(f"{where}.id", f"names {_kind(cid)}, which is no candidate's id")
        entrants.append(Entrant(
            candidate=cid, setting=f.text(e, "setting", where, default=""), items_per_s=_numbers(f, e, "items_per_s", where),
            median_items_per_s=f.number(e, "median_items_per_s", where), median_p99_ms=f.number(e, "median_p99_ms", where),
            concurrency=f.count(e, "concurrency", where) if e.get("concurrency") is not None else None,
            kept_budget=bool(e.get("kept_budget", True)),
        ))
    return Confirmation(rounds=f.count(raw, "rounds", "confirmation"), ratio=f.number(raw, "ratio", "confirmation", default=0.0),
                        kept_start=bool(raw.get("kept_start", False)), entrants=tuple(entrants))


def _tune(f: _File, doc: Mapping[str, Any], label: str) -> TuneRecord:
    raw = f.items(doc, "candidates", "")
    candidates = tuple(_candidate(f, c, f"candidates[{i}]") for i, c in enumerate(raw))
    ids = [c.id for c in candidates]
    if len(set(ids)) != len(ids):
        f.fail("candidates", "has two candidates with the same id")
    front = f.items(doc, "pareto_front", "")
    for i, cid in enumerate(front):
        if cid not in ids:
            f.fail(f"pareto_front[{i}]", f"names {_kind(cid)}, which is no candidate's id")
    if set(front) != set(pareto_front(candidates)):
        f.fail("pareto_front", f"lists {sorted(front)} but the candidates' front is {sorted(pareto_front(candidates))}")
    winner = doc.get("winner")
    if winner is not None and winner not in ids:
        f.fail("winner", f"names {_kind(winner)}, which is no candidate's id")
    budget = doc.get("p99_budget_ms")
    objective = f.text(doc, "objective", "")
    if objective not in ("throughput", "p99-budget"):
        f.fail("objective", f"must be 'throughput' or 'p99-budget', got {_kind(objective)}")
    return TuneRecord(
        label=label,
        source=f.source,
        info=_run_info(f, doc),
        model=f.text(doc, "model", ""),
        objective=objective,
        p99_budget_ms=None if budget is None else f.number(doc, "p99_budget_ms", ""),
        candidates=candidates,
        pareto_front=tuple(c for c in pareto_front(candidates) if c in front),
        winner=winner,
        confirmation=_confirmation(f, doc, ids),
    )


def parse_record(doc: Any, source: str, label: str) -> Record:
    """A parsed JSON document as a record; ``UserError`` naming ``source`` and the key when it is not one."""
    f = _File(source)
    doc = f.obj(doc, "(top level)")
    kind = doc.get("kind")
    if kind not in KINDS:
        known = " or ".join(f"'{k}'" for k in KINDS)
        f.fail("kind", f"is {_kind(kind) if 'kind' in doc else 'missing'}; expected {known}")
    version = doc.get("schema_version")
    if version != KINDS[kind]:
        f.fail("schema_version", f"is {_kind(version) if 'schema_version' in doc else 'missing'}; this repo-builder reads {kind} version {KINDS[kind]}")
    return _bench(f, doc, label) if kind == BENCH_KIND else _tune(f, doc, label)


def load_record(path: Path, label: str | None = None) -> Record:
    """Read one result file; its label defaults to the file's name."""
    source = str(path)
    try:
        if path.exists() and not path.is_file():  # a FIFO or a device would block or never end
            raise UserError(f"{source}: not a regular file; pass a file that bench --json or tune wrote")
        if path.stat().st_size > MAX_RECORD_BYTES:
            raise UserError(f"{source}: over {MAX_RECORD_BYTES >> 20} MiB; pass a file that bench --json or tune wrote")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"{source}: cannot read it ({exc.strerror or exc}); pass a file that bench --json or tune wrote") from None
    except UnicodeDecodeError:
        raise UserError(f"{source}: not UTF-8 text; pass a JSON file that bench --json or tune wrote") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{source}: not JSON ({exc}); pass a file that bench --json or tune wrote") from None
    return parse_record(doc, source, label or path.name)
