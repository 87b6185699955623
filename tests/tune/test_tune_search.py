"""The search alone (``tune.search``): a hill climb over the steps' knobs, checked on landscapes whose best
setting is known, with the measurement handed in as a function (the real one is tested end to end in
test_tune_cli.py on the embedded Triton)."""

from __future__ import annotations

from collections.abc import Callable

from repo_builder.tune.knobs import Setting, StepKnobs, StepSpace, neighbours, setting_of
from repo_builder.tune.search import (
    Budget,
    Measured,
    Objective,
    SearchResult,
    at_best_load,
    finalists,
    hill_climb,
    runoff,
)

SPACES = {
    "pre": StepSpace("pre", (1, 2, 3, 4)),
    "model": StepSpace("model", (1, 2, 3, 4), threads=(1, 2, 3, 4), queue_delays_us=(0, 100, 500, 2000)),
}
START = setting_of({"pre": StepKnobs(1), "model": StepKnobs(1, 4, 100)})


def landscape(best: dict[str, StepKnobs], p99: Callable[[Setting], float] = lambda _: 10.0) -> Callable[[Setting], Measured]:
    """Throughput falls with each knob's distance from ``best``; the slowest step is the farthest one."""
    calls: list[Setting] = []

    def distance(name: str, k: StepKnobs) -> int:
        b = best[name]
        return abs(k.instances - b.instances) + abs((k.threads or 0) - (b.threads or 0)) + abs(
            [0, 100, 500, 2000].index(k.queue_delay_us or 0) - [0, 100, 500, 2000].index(b.queue_delay_us or 0)
        )

    def measure(setting: Setting) -> Measured:
        calls.append(setting)
        far = {name: distance(name, k) for name, k in setting}
        return Measured(setting, items_per_s=100.0 / (1 + sum(far.values())), p50_ms=1.0, p99_ms=p99(setting),
                        step_compute_ms={n: float(d) for n, d in far.items()})

    measure.calls = calls  # type: ignore[attr-defined]
    return measure


def test_hill_climb_finds_best_setting_when_landscape_has_one_peak() -> None:
    best = {"pre": StepKnobs(2), "model": StepKnobs(2, 2, 500)}
    result = hill_climb(START, SPACES, 4, landscape(best), Objective(), Budget(max_candidates=200))
    assert dict(result.best.setting) == best
    assert result.baseline.setting == START


def test_hill_climb_measures_each_setting_once_and_stops_at_budget() -> None:
    measure = landscape({"pre": StepKnobs(4), "model": StepKnobs(4, 1, 2000)})
    result = hill_climb(START, SPACES, 4, measure, Objective(), Budget(max_candidates=5))
    assert len(result.measured) == 5
    assert len(set(measure.calls)) == len(measure.calls)  # type: ignore[attr-defined]


def test_hill_climb_moves_slowest_step_first_when_step_times_are_known() -> None:
    measure = landscape({"pre": StepKnobs(1), "model": StepKnobs(1, 4, 2000)})
    hill_climb(START, SPACES, 4, measure, Objective(), Budget(max_candidates=2))
    first_move = dict(measure.calls[1])  # type: ignore[attr-defined]
    assert first_move["pre"] == StepKnobs(1) and first_move["model"] != StepKnobs(1, 4, 100)


def test_hill_climb_keeps_start_when_gain_is_below_noise() -> None:
    def flat(setting: Setting) -> Measured:
        return Measured(setting, items_per_s=100.0 + (1.0 if setting != START else 0.0), p50_ms=1, p99_ms=1)

    result = hill_climb(START, SPACES, 4, flat, Objective(min_gain=0.03), Budget(max_candidates=50))
    assert result.best.setting == START


def test_hill_climb_respects_p99_budget_when_faster_settings_are_too_slow_per_request() -> None:
    best = {"pre": StepKnobs(3), "model": StepKnobs(3, 1, 2000)}
    # Settings with a long batching delay serve more but break the budget.
    p99 = lambda s: 50.0 if dict(s)["model"].queue_delay_us == 2000 else 10.0  # noqa: E731
    result = hill_climb(START, SPACES, 4, landscape(best, p99), Objective(p99_budget_ms=20.0), Budget(max_candidates=200))
    assert result.best.p99_ms <= 20.0
    assert dict(result.best.setting)["model"].queue_delay_us != 2000


def test_objective_never_picks_a_candidate_with_failed_requests() -> None:
    ok = Measured(START, items_per_s=10, p50_ms=1, p99_ms=1)
    failing = Measured(START, items_per_s=1000, p50_ms=1, p99_ms=1, errors=3)
    assert not Objective().better(failing, ok)
    assert Objective().better(ok, failing)


def test_neighbours_keep_instances_times_threads_within_cores() -> None:
    found = neighbours(StepKnobs(2, 1, 100), SPACES["model"], cores=4)
    assert StepKnobs(3, 1, 100) in found and StepKnobs(1, 4, 100) in found and StepKnobs(2, 2, 100) in found
    assert all(k.instances * (k.threads or 1) <= 4 for k in found)


def _measured(setting: Setting, items: float, p99: float = 5.0, errors: int = 0) -> Measured:
    return Measured(setting, items_per_s=items, p50_ms=1.0, p99_ms=p99, errors=errors)


A = setting_of({"pre": StepKnobs(1)})
B = setting_of({"pre": StepKnobs(2)})
C = setting_of({"pre": StepKnobs(3)})
D = setting_of({"pre": StepKnobs(4)})


def test_finalists_are_the_start_the_best_and_the_runners_up_in_that_order() -> None:
    result = SearchResult((_measured(A, 10), _measured(B, 30), _measured(C, 25, p99=50), _measured(D, 20)), best=_measured(B, 30))
    assert finalists(result, Objective(p99_budget_ms=10), 3) == (A, B, D)  # C broke the budget: not a finalist
    assert finalists(result, Objective(), 4) == (A, B, C, D)
    assert finalists(SearchResult((_measured(A, 10),), best=_measured(A, 10)), Objective(), 3) == (A,)


def test_runoff_crowns_the_best_median_not_the_luckiest_window() -> None:
    # B's single lucky window won the climb; measured again, C serves more in every round.
    windows = {A: iter([10, 11, 10]), B: iter([12, 13, 12]), C: iter([15, 14, 16])}
    order: list[Setting] = []

    def measure(setting: Setting) -> Measured:
        order.append(setting)
        return _measured(setting, float(next(windows[setting])))

    result = runoff((A, B, C), measure, 3, Objective())
    assert result.winner == C and result.median(C) == 15 and result.items_per_s[A] == (10, 11, 10)
    assert order[:3] == [A, B, C] and order[3:6] == [B, C, A]  # the order turns each round


def test_runoff_keeps_the_start_when_no_finalist_keeps_the_budget_or_answers_every_request() -> None:
    def measure(setting: Setting) -> Measured:
        return _measured(setting, 50.0 if setting != A else 10.0, p99=20.0 if setting == B else 5.0, errors=1 if setting == C else 0)

    assert runoff((A, B, C), measure, 2, Objective(p99_budget_ms=10)).winner == A
    assert runoff((B, C), measure, 2, Objective(p99_budget_ms=10)).winner == B  # nothing qualifies: the first entrant


def _ladder(rates: dict[int, tuple[float, float]]) -> tuple[list[int], Callable[[int], Measured]]:
    asked: list[int] = []

    def measure_at(concurrency: int) -> Measured:
        asked.append(concurrency)
        items, p99 = rates[concurrency]
        return Measured(A, items, 1.0, p99, seconds=1.5)

    return asked, measure_at


def test_at_best_load_doubles_until_the_budget_breaks_and_keeps_the_last_load_within_it() -> None:
    rates = {4: (120.0, 4.0), 8: (180.0, 6.0), 16: (230.0, 8.0), 32: (240.0, 14.0), 24: (236.0, 9.0)}  # 32 breaks 10 ms
    asked, measure_at = _ladder(rates)
    m = at_best_load(measure_at, 4, Objective(p99_budget_ms=10))
    # 24, halfway to the load that broke the budget, keeps it but not with the 15 % margin: 16 stays.
    assert asked == [4, 8, 16, 32, 24] and [p.concurrency for p in m.load_points] == [4, 8, 16, 24, 32]
    assert (m.concurrency, m.items_per_s, m.p99_ms) == (16, 230.0, 8.0) and m.seconds == 7.5


def test_at_best_load_tries_halfway_to_the_load_that_broke_the_budget() -> None:
    # The knee is between 8 and 16: 16 gains but breaks the budget, 12 keeps it with the margin.
    rates = {4: (120.0, 3.0), 8: (180.0, 5.0), 16: (260.0, 12.0), 12: (230.0, 7.5)}
    asked, measure_at = _ladder(rates)
    m = at_best_load(measure_at, 4, Objective(p99_budget_ms=10))
    assert asked == [4, 8, 16, 12] and (m.concurrency, m.items_per_s, m.p99_ms) == (12, 230.0, 7.5)
    # Halfway must gain too: 12 serving what 8 does is not taken.
    asked, measure_at = _ladder({**rates, 12: (182.0, 7.0)})
    assert at_best_load(measure_at, 4, Objective(p99_budget_ms=10)).concurrency == 8 and asked == [4, 8, 16, 12]
    # A load above that serves no more is no knee: nothing halfway is tried.
    asked, measure_at = _ladder({4: (120.0, 3.0), 8: (180.0, 5.0), 16: (181.0, 12.0)})
    assert at_best_load(measure_at, 4, Objective(p99_budget_ms=10)).concurrency == 8 and asked == [4, 8, 16]
    # Halving from a start that broke the budget also looks between the load that holds and the one that broke.
    asked, measure_at = _ladder({8: (200.0, 13.0), 4: (150.0, 5.0), 6: (175.0, 8.0)})
    m = at_best_load(measure_at, 8, Objective(p99_budget_ms=10))
    assert asked == [8, 4, 6] and m.concurrency == 6 and [p.concurrency for p in m.load_points] == [4, 6, 8]


def test_at_best_load_takes_no_load_at_the_budgets_edge() -> None:
    # 16 keeps the 10 ms budget by 0.5 ms: within p99's window-to-window noise, so it is not taken (15 % margin).
    asked, measure_at = _ladder({4: (120.0, 4.0), 8: (180.0, 6.0), 16: (230.0, 9.5), 12: (200.0, 8.8)})
    m = at_best_load(measure_at, 4, Objective(p99_budget_ms=10))
    assert asked == [4, 8, 16, 12] and (m.concurrency, m.items_per_s) == (8, 180.0)
    asked, measure_at = _ladder({4: (120.0, 4.0), 8: (180.0, 6.0), 16: (230.0, 9.5), 32: (231.0, 9.9)})
    assert at_best_load(measure_at, 4, Objective(p99_budget_ms=10, p99_margin=0.0)).concurrency == 16


def test_at_best_load_halves_from_a_load_that_breaks_the_budget_until_one_keeps_it() -> None:
    asked, measure_at = _ladder({8: (200.0, 13.0), 4: (150.0, 11.0), 2: (90.0, 5.0), 1: (50.0, 2.0), 3: (120.0, 9.0)})
    m = at_best_load(measure_at, 8, Objective(p99_budget_ms=10))
    assert asked == [8, 4, 2, 3] and (m.concurrency, m.items_per_s) == (2, 90.0)  # 3 keeps 10 ms, not the margin
    assert [p.concurrency for p in m.load_points] == [2, 3, 4, 8]
    asked, measure_at = _ladder({2: (90.0, 50.0), 1: (50.0, 40.0)})
    never = at_best_load(measure_at, 2, Objective(p99_budget_ms=10))
    assert asked == [2, 1] and not Objective(p99_budget_ms=10).feasible(never) and never.concurrency == 2  # the first, infeasible


def test_at_best_load_stops_when_more_load_serves_no_more_and_never_climbs_without_a_budget() -> None:
    asked, measure_at = _ladder({4: (120.0, 2.0), 8: (121.0, 3.0)})
    m = at_best_load(measure_at, 4, Objective(p99_budget_ms=10))
    assert asked == [4, 8] and m.concurrency == 4 and m.items_per_s == 120.0  # +0.8 %: noise, not a gain
    asked, measure_at = _ladder({4: (120.0, 2.0), 8: (300.0, 3.0)})
    m = at_best_load(measure_at, 4, Objective())
    assert asked == [4] and m.concurrency == 4 and m.load_points == ()
    asked, measure_at = _ladder({4: (120.0, 2.0), 8: (300.0, 3.0)})
    assert at_best_load(measure_at, 4, Objective(p99_budget_ms=10), max_concurrency=4).concurrency == 4 and asked == [4]
