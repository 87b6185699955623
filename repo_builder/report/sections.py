"""Records to the page's parts: what each run measured, each chart with its caption and its table.

Pure assembly: the figures come from the records as they are, the drawing from ``charts``. A chart with
nothing to draw (an empty run, a model whose every request failed) becomes a notice that says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from repo_builder.report.charts import Curve, Point, StepBars, curve_chart, step_chart
from repo_builder.report.records import BenchRecord, Candidate, Level, ModelRun, Record, RunInfo, TuneRecord


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: frozenset[int] = frozenset()  # columns of figures, aligned right


@dataclass(frozen=True)
class Chart:
    chart_id: str
    title: str
    caption: str
    svg: str | None  # None: nothing to draw, ``notices`` say why
    series: int  # series drawn (the browser test counts them in the DOM)
    table: Table
    notices: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunSummary:
    label: str
    facts: tuple[tuple[str, str], ...]
    notices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Page:
    title: str
    runs: tuple[RunSummary, ...]
    charts: tuple[Chart, ...]


def _ms(value: float) -> str:
    return f"{value:.2f}"


def _info_facts(info: RunInfo) -> list[tuple[str, str]]:
    gpus = f"GPU: {', '.join(info.gpus)}" if info.gpus else "no GPU"
    cores = f"{info.cores} cores" if info.cores is not None else "cores not recorded"
    return [
        ("Repository", info.repository),
        ("Digest", info.repository_digest or "not recorded"),
        ("Server", f"tritonserver {info.server_version}" if info.server_version else "not recorded"),
        ("Machine", f"{cores}, {gpus}"),
        ("Date", info.date or "not recorded"),
        ("Settings", "; ".join(f"{k}={v}" for k, v in info.settings) or "not recorded"),
    ]


def _summary(record: Record) -> RunSummary:
    if isinstance(record, TuneRecord):
        budget = f"p99 <= {record.p99_budget_ms:g} ms" if record.p99_budget_ms is not None else "none"
        head = [("File", record.source), ("Kind", "tune search"), ("Model", record.model), ("Objective", record.objective), ("Budget", budget)]
        empty = () if record.candidates else ("This search measured no candidate.",)
        return RunSummary(record.label, (*head, *_info_facts(record.info)), empty)
    models = ", ".join(m.model for m in record.models) or "none"
    empty = () if record.models else ("This run measured no model.",)
    return RunSummary(record.label, (("File", record.source), ("Kind", "bench"), ("Models", models), *_info_facts(record.info)), empty)


def chosen_level(levels: Sequence[Level], budget_ms: float | None) -> Level | None:
    """The configuration to pick: the most items/s among error-free levels within the p99 budget."""
    fit = [lv for lv in levels if lv.answered and lv.errors == 0 and (budget_ms is None or lv.p99_ms <= budget_ms)]
    return max(fit, key=lambda lv: lv.items_per_s) if fit else None


def _level_row(label: str, model: str, level: Level, chosen: Level | None, budget_ms: float | None) -> tuple[str, ...]:
    if not level.answered:
        note = f"no answer: {level.first_error or 'every request failed'}"
    elif level is chosen:
        note = "chosen"
    elif budget_ms is not None and level.p99_ms > budget_ms:
        note = "over budget"
    else:
        note = f"{level.errors} errors: {level.first_error}" if level.errors else ""
    figures = (f"{level.items_per_s:.1f}", _ms(level.p50_ms), _ms(level.p90_ms), _ms(level.p99_ms)) if level.answered else ("-",) * 4
    return (label, model, str(level.concurrency), *figures, str(level.errors), note)


def _curve_name(record: BenchRecord, model: ModelRun, overlaid: bool) -> str:
    return f"{record.label}: {model.model}" if overlaid else model.model


def throughput_chart(chart_id: str, records: Sequence[BenchRecord], budget_ms: float | None) -> Chart:
    """Items/s against p99, one curve per (run, model), points labelled by concurrency."""
    overlaid = len(records) > 1
    curves: list[Curve] = []
    rows: list[tuple[str, ...]] = []
    notices: list[str] = []
    for record in records:
        for model in record.models:
            answered = [lv for lv in model.levels if lv.answered]
            chosen = chosen_level(model.levels, budget_ms)
            rows.extend(_level_row(record.label, model.model, lv, chosen, budget_ms) for lv in model.levels)
            if not answered:
                first = next((lv.first_error for lv in model.levels if lv.first_error), "")
                notices.append(f"{record.label}: every request to '{model.model}' failed" + (f" (first error: {first})" if first else "") + ": nothing to draw for it.")
                continue
            points = tuple(Point(lv.p99_ms, lv.items_per_s, f"c={lv.concurrency}") for lv in answered)
            curves.append(Curve(_curve_name(record, model, overlaid), points, chosen=answered.index(chosen) if chosen else None))
        if not record.models:
            notices.append(f"{record.label}: this run measured no model.")
    budget = f" The dashed line is the p99 budget of {budget_ms:g} ms." if budget_ms is not None else ""
    caption = (
        "Throughput against p99 latency; each point is labelled with its concurrency (closed-loop clients). "
        f"The star marks the chosen configuration: the most items/s without errors{' within the budget' if budget_ms is not None else ''}.{budget}"
    )
    svg = curve_chart(chart_id, curves, xlabel="p99 latency (ms)", ylabel="throughput (items/s)", budget_ms=budget_ms) if curves else None
    if not curves:
        notices.append("No request was answered in any run: there is no curve to draw.")
    headers = ("Run", "Model", "Concurrency", "Items/s", "p50 ms", "p90 ms", "p99 ms", "Errors", "Note")
    return Chart(chart_id, "Throughput against p99 latency", caption, svg, len(curves), Table(headers, tuple(rows), frozenset(range(2, 8))), tuple(notices))


def _step_names(levels: Sequence[Level]) -> list[str]:
    names: list[str] = []
    for level in levels:
        names.extend(s.model for s in level.steps[1:] if s.model not in names)
    return names


def _slowest_caption(levels: Sequence[Level]) -> str:
    named = [(lv.concurrency, lv.slowest_step) for lv in levels if lv.slowest_step]
    if not named:
        return "No step answered, so none is named the slowest."
    if len({name for _, name in named}) == 1:
        return f"Slowest step: {named[0][1]} (the most compute time per request at every concurrency)."
    return "Slowest step, by concurrency: " + ", ".join(f"{name} at {c}" for c, name in named) + "."


def step_breakdown_chart(chart_id: str, record: BenchRecord, model: ModelRun, overlaid: bool) -> Chart:
    """One ensemble: per concurrency, each step's queue and compute time per request, stacked."""
    answered = [lv for lv in model.levels if lv.answered]
    bars, rows, idle = [], [], []
    for name in _step_names(answered):
        found = [next((s for s in lv.steps[1:] if s.model == name), None) for lv in answered]
        if not any(s and s.requests for s in found):  # a step no request reached has no time to stack
            idle.append(name)
            continue
        bars.append(StepBars(name, tuple(s.queue_ms if s else 0.0 for s in found), tuple(s.compute_ms if s else 0.0 for s in found)))
    for level in answered:
        for step in level.steps[1:]:
            mark = "slowest" if step.model == level.slowest_step else ""
            rows.append((str(level.concurrency), step.model, str(step.requests), f"{step.mean_batch:.2f}", _ms(step.queue_ms), _ms(step.compute_ms), mark))
    title = f"Where the time goes: {_curve_name(record, model, overlaid)}"
    caption = "Time per request in each step of the ensemble (hatched: queued, solid: computing), at each concurrency. " + _slowest_caption(answered)
    caption += f" Not called in this run: {', '.join(idle)}." if idle else ""
    notices = () if answered else (f"Every request to '{model.model}' failed: no step time to show.",)
    svg = step_chart(chart_id, [lv.concurrency for lv in answered], bars) if answered and bars else None
    headers = ("Concurrency", "Step", "Requests", "Mean batch", "Queue ms", "Compute ms", "")
    return Chart(chart_id, title, caption, svg, len(bars) if svg else 0, Table(headers, tuple(rows), frozenset({0, 2, 3, 4, 5})), notices)


def differing_knobs(candidates: Sequence[Candidate]) -> tuple[list[str], list[tuple[str, str]]]:
    """The knob names whose value differs between candidates (one missing counts as differing), and the
    knobs every candidate sets alike with their value."""
    names = list(dict.fromkeys(k for c in candidates for k, _ in c.knobs))
    values = {name: {dict(c.knobs).get(name) for c in candidates} for name in names}
    differ = [n for n in names if len(values[n]) > 1]
    same = [(n, next(iter(values[n]))) for n in names if len(values[n]) == 1]
    return differ, [(n, v) for n, v in same if v is not None]


def _dominator(record: TuneRecord, winner: Candidate) -> Candidate | None:
    """An error-free candidate that served more at a lower p99 in its search window than ``winner`` did."""
    better = [c for c in record.candidates if c.errors == 0 and c.id != winner.id and c.items_per_s >= winner.items_per_s
              and c.p99_ms <= winner.p99_ms]
    return max(better, key=lambda c: c.items_per_s, default=None)


def _star_note(record: TuneRecord, by_id: dict[str, Candidate]) -> str:
    """Why the star is where it is: what the winner won on, and why it is off the front when it is."""
    if record.winner is None or record.winner not in by_id:
        return ""
    winner, confirmed = by_id[record.winner], record.confirmation
    entrants = confirmed.entrants if confirmed else ()
    if confirmed and entrants:
        finalists = ", ".join(e.candidate or e.setting for e in entrants)
        start = entrants[0]
        note = (f" The finalists ({finalists}) were measured again in {confirmed.rounds} interleaved round(s), each at its own load "
                f"(the points labelled 'median'; the table lists each round). The star marks the winner, {winner.id}, at its median there: ")
        note += (f"the climb's best did not serve more than the start by more than the noise ({confirmed.ratio:.2f}x), so the start is kept."
                 if confirmed.kept_start else
                 f"it served the most in those rounds ({confirmed.ratio:.2f}x the start's median of {start.median_items_per_s:.1f} items/s)."
                 if winner.id != start.candidate else "no finalist served more than the start by more than the noise.")
    else:
        note = f" The star marks the winner, {winner.id}: the most items/s in the search's own windows{' within the budget' if record.p99_budget_ms is not None else ''}."
    if winner.id not in record.pareto_front and winner.errors == 0:
        other = _dominator(record, winner)
        beaten = f"{other.id} served more at a lower p99 in its single window" if other else "another candidate beat it there"
        note += f" {winner.id} is not on the front, which is drawn from the search windows: {beaten}; " + (
            "the confirmation rounds, which measure the finalists alternately under the same conditions, decide the winner."
            if entrants else "the climb takes a new best only when it serves more than the noise, so it kept the earlier setting.")
    return note


def tune_chart(chart_id: str, record: TuneRecord) -> Chart:
    """Every candidate as a point, the Pareto front as a line, the confirmation rounds' medians, the winner
    starred where it won; axes spanning the data; the table lists the knobs that differ and every round."""
    measured = [c for c in record.candidates if c.errors == 0]
    by_id = {c.id: c for c in record.candidates}
    front = [by_id[i] for i in record.pareto_front]
    entrants = record.confirmation.entrants if record.confirmation else ()
    rounds = {e.candidate: e for e in entrants if e.candidate and e.candidate in by_id}
    star_in_rounds = record.winner in rounds and rounds[record.winner].median_items_per_s > 0
    curves = []
    if measured:
        winner = next((i for i, c in enumerate(measured) if c.id == record.winner), None)
        curves.append(Curve("candidates (search)", tuple(Point(c.p99_ms, c.items_per_s, c.id) for c in measured), joined=False,
                            chosen=None if star_in_rounds else winner, chosen_word="winner"))
    if front:
        curves.append(Curve("Pareto front", tuple(Point(c.p99_ms, c.items_per_s, "") for c in sorted(front, key=lambda c: c.p99_ms))))
    drawn = [e for e in rounds.values() if e.median_items_per_s > 0]
    if drawn:
        chosen = next((i for i, e in enumerate(drawn) if e.candidate == record.winner), None)
        curves.append(Curve(f"finalists, median of {record.confirmation.rounds if record.confirmation else 0} round(s)",
                            tuple(Point(e.median_p99_ms, e.median_items_per_s, f"{e.candidate} median") for e in drawn),
                            joined=False, chosen=chosen, chosen_word="winner"))
    differ, same = differing_knobs(record.candidates)
    rows = tuple(
        (
            c.id, "; ".join(f"{k}={v}" for k, v in c.knobs if k in differ) or "-", f"{c.items_per_s:.1f}" if not c.errors else "-",
            _ms(c.p99_ms) if not c.errors else "-", str(c.errors),
            ", ".join(f"{v:.1f}" for v in rounds[c.id].items_per_s) if c.id in rounds else "",
            f"{rounds[c.id].median_items_per_s:.1f}" if c.id in rounds else "", _ms(rounds[c.id].median_p99_ms) if c.id in rounds else "",
            "yes" if c.id in record.pareto_front else "", "winner" if c.id == record.winner else "",
        )
        for c in record.candidates
    )
    notices = [] if measured else ["No candidate was measured without errors: there is nothing to draw."]
    if record.candidates and record.winner is None:
        notices.append("The search chose no winner (no candidate met the budget).")
    budget = f" The dashed line is the p99 budget of {record.p99_budget_ms:g} ms." if record.p99_budget_ms is not None else ""
    alike = f" Every candidate sets {', '.join(f'{k}={v}' for k, v in same)}; the table lists the knobs that differ." if same else ""
    caption = (f"Each configuration tune measured for '{record.model}', one window each; the line joins the Pareto front (no other candidate "
               f"has both more items/s and a lower p99). The axes span the measured values, not from zero.{_star_note(record, by_id)}{budget}{alike}")
    svg = (curve_chart(chart_id, curves, xlabel="p99 latency (ms)", ylabel="throughput (items/s)", budget_ms=record.p99_budget_ms, from_zero=False)
           if curves else None)
    headers = ("Candidate", "Knobs that differ", "Items/s", "p99 ms", "Errors", "Confirmation rounds items/s", "Median items/s",
               "Median p99 ms", "Pareto front", "")
    return Chart(chart_id, f"Tune search: {record.label}", caption, svg, len(curves), Table(headers, rows, frozenset({2, 3, 4, 6, 7})), tuple(notices))


def build_page(records: Sequence[Record], budget_ms: float | None = None) -> Page:
    """Every chart the records call for, in order: throughput, step breakdowns, tune searches."""
    benches = [r for r in records if isinstance(r, BenchRecord)]
    charts: list[Chart] = []
    record: Record  # the loops below: benches, then every record

    def next_id() -> str:
        return f"chart-{len(charts) + 1}"

    if benches:
        charts.append(throughput_chart(next_id(), benches, budget_ms))
    for record in benches:
        for model in record.models:
            if any(len(lv.steps) > 1 for lv in model.levels):
                charts.append(step_breakdown_chart(next_id(), record, model, len(benches) > 1))
    for record in records:
        if isinstance(record, TuneRecord):
            charts.append(tune_chart(next_id(), record))
    title = "repo-builder report: " + ", ".join(r.label for r in records)
    return Page(title, tuple(_summary(r) for r in records), tuple(charts))
