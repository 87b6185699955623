"""The whole of ``tune``: read the steps, climb, re-measure the finalists (the start, the climb's best, the
runners-up) in interleaved rounds, write the winner (unless --dry-run) and the search record. Under a p99
budget each setting is measured at the load it serves most at within it (``search.at_best_load``), starting
from the load of the best setting so far; the finalists are re-measured each at its own load."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.render.tuning import available_cores
from repo_builder.report.run_info import repository_digest
from repo_builder.triton.bench import default_models
from repo_builder.tune.commit import write_winner
from repo_builder.tune.knobs import Setting, current_knobs, setting_of, step_space
from repo_builder.tune.record import tune_document
from repo_builder.tune.runner import CandidateRunner, MeasureSettings, read_model_config, tunable_steps
from repo_builder.tune.search import (
    Budget,
    Measured,
    Objective,
    SearchResult,
    at_best_load,
    describe,
    finalists,
    hill_climb,
    runoff,
)

Log = Callable[[str], None]
CONFIRM_RETRIES = 2  # confirmation rounds run again with a budget-breaking finalist at half its load, at most this often


@dataclass(frozen=True)
class TuneRequest:
    repository: Path
    model: str | None = None  # the ensemble clients call; None: the repository's only ensemble
    objective: Objective = field(default_factory=Objective)
    budget: Budget = field(default_factory=Budget)
    measure: MeasureSettings = field(default_factory=MeasureSettings)
    max_instances: int | None = None  # None: the cores, at least 2
    confirm_rounds: int = 2  # interleaved re-measurements of the finalists
    finalists: int = 3  # the start, the climb's best and the runners-up re-measured in those rounds
    max_concurrency: int = 64  # with a p99 budget: the most load a setting is tried at (doubling from the best's load)
    files: Mapping[str, Sequence[bytes]] = field(default_factory=dict)  # --input NAME=FILE
    write: bool = True  # False: --dry-run
    tritonserver: str | None = None


@dataclass(frozen=True)
class TuneResult:
    model: str
    search: SearchResult
    document: dict[str, Any]
    written: tuple[str, ...]  # steps whose config.pbtxt changed

    @property
    def gain(self) -> float:
        """The winner's throughput over the start's, from the confirmation rounds when they ran."""
        confirmed = self.document.get("confirmation")
        if confirmed:
            return float(confirmed["ratio"])
        base = self.search.baseline.items_per_s
        return self.search.best.items_per_s / base if base else 0.0


def only_ensemble(repository: Path) -> str:
    names = [n for n in default_models(repository) if (repository / n / "config.pbtxt").is_file()]
    ensembles = [n for n in names if read_model_config(repository, n).platform == "ensemble"]
    if len(ensembles) != 1:
        found = ", ".join(ensembles) or "none"
        raise UserError(f"{repository}: tune needs one ensemble to tune (found {found}); pass --model NAME")
    return ensembles[0]


def _at_load(runner: CandidateRunner, loads: Mapping[Setting, int], setting: Setting) -> Measured:
    return runner.measure(setting, concurrency=loads[setting])


def _confirm(runner: CandidateRunner, search: SearchResult, request: TuneRequest,
             log: Log) -> tuple[SearchResult, dict[str, Any] | None, dict[Setting, dict[str, Any]]]:
    """The finalists measured alternately: machines are noisy, so the winner and its gain over the start come
    from medians of interleaved rounds, not from single windows minutes apart. A gain below the noise keeps
    the start (when the start kept the budget in them). Each finalist runs at the load the search chose for it; a
    load chosen at the budget's edge may break it when measured again, so a finalist that did (and served more
    than the best that kept it) runs the rounds again at half its load, twice at most. Also returns each finalist's
    record of the rounds, by setting."""
    entrants = finalists(search, request.objective, request.finalists)
    if request.confirm_rounds <= 0 or len(entrants) < 2:
        return search, None, {}
    loads = {m.setting: m.concurrency or request.measure.concurrency for m in search.measured}
    for attempt in range(CONFIRM_RETRIES + 1):
        result = runoff(entrants, functools.partial(_at_load, runner, dict(loads)), request.confirm_rounds, request.objective, log)
        kept = max((result.median(s) for s in result.qualified), default=0.0)
        over = [s for s in entrants if s not in result.qualified and result.errors[s] == 0 and loads[s] > 1 and result.median(s) > kept]
        if not over or attempt == CONFIRM_RETRIES:
            break
        log(f"{len(over)} finalist(s) broke the budget at the load chosen for them; the rounds again with those at half their load")
        loads.update({s: max(1, loads[s] // 2) for s in over})
    start = search.baseline.setting
    start_median, winner_median = result.median(start), result.median(result.winner)
    ratio = round(winner_median / start_median, 3) if start_median else 0.0
    kept_start = result.winner != start and start in result.qualified and ratio < 1.0 + request.objective.min_gain
    winner = start if kept_start else result.winner
    if kept_start:
        log(f"the winner's gain did not hold in the confirmation rounds ({ratio:.2f}x); keeping the start")
    by_setting = {m.setting: m for m in search.measured}
    records = {s: {"setting": describe(s), "items_per_s": list(result.items_per_s[s]), "p99_ms": list(result.p99_ms[s]),
                   "errors": result.errors[s], "median_items_per_s": round(result.median(s), 2),
                   "median_p99_ms": round(result.median_p99(s), 2), "concurrency": loads[s],
                   "kept_budget": s in result.qualified} for s in entrants}
    confirmation: dict[str, Any] = {
        "rounds": request.confirm_rounds,
        "start_items_per_s": list(result.items_per_s[start]),
        "winner_items_per_s": list(result.items_per_s[winner]),
        "ratio": 1.0 if winner == start else ratio,
        "climb_best_kept": winner == search.best.setting,
        "entrants": list(records.values()),
    }
    if kept_start:
        confirmation.update(kept_start=True, ratio=ratio)
    return SearchResult(measured=search.measured, best=by_setting[winner]), confirmation, records


def _operating_point(search: SearchResult, confirmed: Mapping[Setting, Mapping[str, Any]], request: TuneRequest) -> dict[str, Any] | None:
    """With a p99 budget and a feasible winner: the load it serves most at within the budget and every load it was
    tried at, as Model Analyzer reports its best (a rate at a load). When the confirmation rounds ran, the rate,
    p99 and load are theirs (medians), and ``within_budget`` says whether it kept the budget there."""
    best = search.best
    budget = request.objective.p99_budget_ms
    if budget is None or not request.objective.feasible(best) or not best.load_points:
        return None
    point: dict[str, Any] = {"concurrency": best.concurrency, "items_per_s": round(best.items_per_s, 2), "p99_ms": round(best.p99_ms, 2)}
    entrant = confirmed.get(best.setting)
    if entrant is not None:
        point.update(concurrency=entrant["concurrency"], items_per_s=entrant["median_items_per_s"], p99_ms=entrant["median_p99_ms"])
    point["within_budget"] = point["p99_ms"] <= budget
    point["points"] = [{"concurrency": p.concurrency, "items_per_s": round(p.items_per_s, 2), "p50_ms": round(p.p50_ms, 2),
                        "p99_ms": round(p.p99_ms, 2), "errors": p.errors} for p in best.load_points]
    return point


def tune_repository(request: TuneRequest, log: Log = lambda _: None) -> TuneResult:
    repository = request.repository
    if not repository.is_dir():
        raise UserError(f"{repository}: not a folder; pass a model repository (e.g. the --out of 'repo-builder build')")
    model = request.model or only_ensemble(repository)
    configs = tunable_steps(repository, model)
    cores = available_cores()
    max_instances = request.max_instances or max(2, cores)
    spaces = {name: step_space(c, cores, max_instances) for name, c in configs.items()}
    start = setting_of({name: current_knobs(c) for name, c in configs.items()})
    digest = repository_digest(repository)
    began = time.monotonic()
    with CandidateRunner(repository, model, configs, request.measure, request.files, log, request.tritonserver) as runner:
        server_version = str(runner.server.client.get_server_metadata().version)

        load = {"concurrency": request.measure.concurrency, "items_per_s": 0.0}  # the best feasible setting's so far

        def measure(setting: Setting) -> Measured:
            log(f"measuring {_short(setting)}")
            m = at_best_load(lambda c: runner.measure(setting, concurrency=c), int(load["concurrency"]), request.objective,
                             request.max_concurrency, log)
            if request.objective.feasible(m) and m.items_per_s > load["items_per_s"]:
                load.update(concurrency=m.concurrency, items_per_s=m.items_per_s)
            return m

        search = hill_climb(start, spaces, cores, measure, request.objective, request.budget, log)
        search, confirmation, confirmed = _confirm(runner, search, request, log)
        generator = runner.generator
    operating = _operating_point(search, confirmed, request)
    settings = {
        "concurrency": request.measure.concurrency, "seconds": request.measure.seconds, "warmup": request.measure.warmup,
        "max_candidates": request.budget.max_candidates, "max_seconds": request.budget.max_seconds,
        "max_instances": max_instances, "cores": cores, "load_generator": generator.kind,
        **({"load_generator_note": generator.note} if generator.note else {}),
    }
    document = tune_document(
        repository, model, search, request.objective, digest=digest, server_version=server_version,
        settings=settings, seconds=time.monotonic() - began, confirmation=confirmation,
    )
    if operating is not None:
        document["operating_point"] = operating
    written: list[str] = []
    if request.write and request.objective.feasible(search.best):
        written = write_winner(repository, configs, search.best.setting, start, log)
    return TuneResult(model=model, search=search, document=document, written=tuple(written))


def _short(setting: Setting) -> str:
    return "; ".join(f"{name}: {k.describe()}" for name, k in setting)
