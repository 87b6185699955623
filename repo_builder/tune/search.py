"""How ``tune`` searches: a hill climb over the steps' knobs, the slowest step first.

Model Analyzer's quick search climbs one model's knobs at a time; an ensemble's steps share the same
cores, so a setting is judged jointly here: each candidate is the whole pipeline's setting, measured end to
end. From the build's own setting, every one-move neighbour is tried, steps ordered by how much compute
time they took in the last measurement (the bottleneck first); the first one that serves more (by at least
``min_gain``) within the latency budget becomes the new best, and the climb goes on from there until no
neighbour wins or the budget of candidates or seconds is spent.

Under a p99 budget a setting is judged at the load it serves most at within the budget (``at_best_load``), as
Model Analyzer sweeps the concurrency of each configuration: more instances often win only at more load, so a
search at one fixed load picks settings that break the budget as soon as clients send more.

Pure logic: measuring is a function handed in (``Measure``), so the search is tested without a server.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from repo_builder.tune.knobs import Setting, StepKnobs, StepSpace, neighbours


@dataclass(frozen=True)
class LoadPoint:
    """A setting measured at one closed-loop concurrency."""

    concurrency: int
    items_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int = 0


@dataclass(frozen=True)
class Measured:
    """What one candidate served, at ``concurrency`` (its best load within the budget when there is one)."""

    setting: Setting
    items_per_s: float
    p50_ms: float
    p99_ms: float
    errors: int = 0
    step_compute_ms: Mapping[str, float] = field(default_factory=dict)  # per step, per request
    seconds: float = 0.0  # wall time the measurement took (loading included)
    concurrency: int = 0  # the closed-loop load measured at (0: not recorded)
    load_points: tuple[LoadPoint, ...] = ()  # every load it was tried at, by concurrency (p99 budget only)


Measure = Callable[[Setting], Measured]


@dataclass(frozen=True)
class Objective:
    """Throughput, optionally under a p99 budget; a candidate with failed requests never wins."""

    p99_budget_ms: float | None = None
    min_gain: float = 0.03  # a new best must serve this much more: less is the machine's noise
    # More load is taken only while p99 keeps this share of the budget free: p99 at one load moves by +-15 % between
    # windows on a shared machine, so a load at the budget's edge breaks it about half the time measured again.
    p99_margin: float = 0.15

    def feasible(self, m: Measured) -> bool:
        return m.errors == 0 and m.items_per_s > 0 and (self.p99_budget_ms is None or m.p99_ms <= self.p99_budget_ms)

    def better(self, new: Measured, best: Measured) -> bool:
        if not self.feasible(new):
            return False
        if not self.feasible(best):  # anything feasible beats an infeasible start
            return True
        return new.items_per_s > best.items_per_s * (1.0 + self.min_gain)

    def keeps_margin(self, m: Measured) -> bool:
        """Feasible with ``p99_margin`` of the budget to spare (what a higher load must show to be taken)."""
        return self.feasible(m) and (self.p99_budget_ms is None or m.p99_ms <= self.p99_budget_ms * (1.0 - self.p99_margin))

    @property
    def name(self) -> str:
        return "throughput" if self.p99_budget_ms is None else "p99-budget"


@dataclass(frozen=True)
class Budget:
    max_candidates: int = 16
    max_seconds: float = 600.0


@dataclass(frozen=True)
class SearchResult:
    measured: tuple[Measured, ...]  # in the order measured; the first is the starting setting
    best: Measured

    @property
    def baseline(self) -> Measured:
        return self.measured[0]


def _moves(best: Measured, spaces: Mapping[str, StepSpace], cores: int) -> Iterator[Setting]:
    knobs = dict(best.setting)
    order = sorted(knobs, key=lambda name: -best.step_compute_ms.get(name, 0.0))  # the bottleneck first
    for name in order:
        for alternative in neighbours(knobs[name], spaces[name], cores):
            yield tuple(sorted({**knobs, name: alternative}.items()))


def hill_climb(
    start: Setting,
    spaces: Mapping[str, StepSpace],
    cores: int,
    measure: Measure,
    objective: Objective,
    budget: Budget,
    log: Callable[[str], None] = lambda _: None,
    clock: Callable[[], float] = time.monotonic,
) -> SearchResult:
    """Climb from ``start``; every setting is measured at most once."""
    began = clock()
    seen: dict[Setting, Measured] = {}

    def spent() -> bool:
        return len(seen) >= budget.max_candidates or clock() - began >= budget.max_seconds

    best = seen[start] = measure(start)
    log(f"start: {best.items_per_s:.1f} items/s, p99 {best.p99_ms:.1f} ms")
    improved = True
    while improved and not spent():
        improved = False
        for setting in _moves(best, spaces, cores):
            if setting in seen:
                continue
            if spent():
                break
            candidate = seen[setting] = measure(setting)
            if objective.better(candidate, best):
                log(f"better: {candidate.items_per_s:.1f} items/s, p99 {candidate.p99_ms:.1f} ms")
                best, improved = candidate, True
                break
    return SearchResult(measured=tuple(seen.values()), best=best)


@dataclass(frozen=True)
class Runoff:
    """The finalists re-measured in interleaved rounds: a single window can crown the machine's noise."""

    entrants: tuple[Setting, ...]  # the start first, then the climb's best, then the runners-up
    items_per_s: Mapping[Setting, tuple[float, ...]]
    p99_ms: Mapping[Setting, tuple[float, ...]]
    errors: Mapping[Setting, int]
    winner: Setting
    qualified: tuple[Setting, ...] = ()  # the entrants that kept the budget and answered every request

    def median(self, setting: Setting) -> float:
        return statistics.median(self.items_per_s[setting])

    def median_p99(self, setting: Setting) -> float:
        return statistics.median(self.p99_ms[setting])


def finalists(result: SearchResult, objective: Objective, count: int) -> tuple[Setting, ...]:
    """The start, the climb's best and the next-best feasible settings it measured: ``count`` at most (two at least)."""
    ranked = sorted((m for m in result.measured if objective.feasible(m)), key=lambda m: -m.items_per_s)
    chosen = [result.baseline.setting, result.best.setting]
    chosen += [m.setting for m in ranked if m.setting not in chosen]
    return tuple(dict.fromkeys(chosen))[: max(2, count)]


def runoff(entrants: Sequence[Setting], measure: Measure, rounds: int, objective: Objective,
           log: Callable[[str], None] = lambda _: None) -> Runoff:
    """Each entrant measured once per round, the order turned each round (no entrant always follows the same
    one); the winner has the highest median throughput among those whose median p99 keeps the budget and
    which never failed a request. None qualifies: the start stays."""
    items: dict[Setting, list[float]] = {s: [] for s in entrants}
    p99: dict[Setting, list[float]] = {s: [] for s in entrants}
    errors = dict.fromkeys(entrants, 0)
    for index in range(rounds):
        shift = index % len(entrants)
        for setting in (*entrants[shift:], *entrants[:shift]):
            m = measure(setting)
            items[setting].append(m.items_per_s)
            p99[setting].append(m.p99_ms)
            errors[setting] += m.errors
            log(f"runoff {index + 1}/{rounds}: {describe(setting)}: {m.items_per_s:.1f} items/s, p99 {m.p99_ms:.1f} ms")

    def qualifies(setting: Setting) -> bool:
        return errors[setting] == 0 and (objective.p99_budget_ms is None or statistics.median(p99[setting]) <= objective.p99_budget_ms)

    qualified = [s for s in entrants if qualifies(s)]
    winner = max(qualified, key=lambda s: statistics.median(items[s])) if qualified else entrants[0]
    return Runoff(tuple(entrants), {s: tuple(v) for s, v in items.items()}, {s: tuple(v) for s, v in p99.items()},
                  errors, winner, tuple(qualified))


def at_best_load(measure_at: Callable[[int], Measured], start: int, objective: Objective, max_concurrency: int = 64,
                 log: Callable[[str], None] = lambda _: None) -> Measured:
    """One setting at the load it serves most at within the p99 budget, as Model Analyzer sweeps each configuration's
    concurrency. From ``start``: doubling while the budget holds with ``p99_margin`` to spare and more load serves more
    (by ``min_gain``); halving (down to 1) until it holds when it does not at ``start``. Where the load above the
    chosen one broke the budget (a knee between them), one more load halfway between is tried (8 -> 16 broke: 12):
    Model Analyzer's sweep also looks between powers of two. Without a budget more load only adds latency: one measurement at
    ``start``. The result is the chosen load's measurement (the first one when none keeps the budget), carrying every
    load tried and the time all of them took."""
    first = measure_at(start)
    if objective.p99_budget_ms is None:
        return replace(first, concurrency=first.concurrency or start)
    tried = {start: first}

    def at(concurrency: int) -> Measured:
        m = tried[concurrency] = measure_at(concurrency)
        log(f"load {concurrency}: {m.items_per_s:.1f} items/s, p99 {m.p99_ms:.1f} ms")
        return m

    def gains(m: Measured, over: Measured) -> bool:
        return m.items_per_s > over.items_per_s * (1.0 + objective.min_gain)

    chosen: int | None = start if objective.feasible(first) else None
    broke: int | None = None  # the lowest load above the chosen one that broke the budget (or its margin)
    if chosen is not None:
        concurrency = start * 2
        while concurrency <= max_concurrency:
            m = at(concurrency)
            if not objective.keeps_margin(m):
                broke = concurrency if gains(m, tried[chosen]) else None  # serving no more: no knee to look for
                break
            if not gains(m, tried[chosen]):
                break
            chosen, concurrency = concurrency, concurrency * 2
    else:
        concurrency = start // 2
        while concurrency >= 1 and chosen is None:
            broke = concurrency * 2
            chosen = concurrency if objective.feasible(at(concurrency)) else None
            concurrency //= 2
    if chosen is not None and broke is not None and broke - chosen >= 2:
        middle = chosen + (broke - chosen) // 2
        m = at(middle)
        if objective.keeps_margin(m) and gains(m, tried[chosen]):
            chosen = middle
    concurrency = start if chosen is None else chosen
    points = tuple(LoadPoint(c, m.items_per_s, m.p50_ms, m.p99_ms, m.errors) for c, m in sorted(tried.items()))
    return replace(tried[concurrency], concurrency=concurrency, load_points=points,
                   seconds=sum(m.seconds for m in tried.values()))


def describe(setting: Setting) -> str:
    return "; ".join(f"{name}: {k.describe()}" for name, k in setting)


__all__ = ["Budget", "LoadPoint", "Measure", "Measured", "Objective", "Runoff", "SearchResult", "StepKnobs", "at_best_load",
           "describe", "finalists", "hill_climb", "runoff"]
