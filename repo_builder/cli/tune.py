"""``repo-builder tune REPO``: find the steps' instance counts, threads and batching delays that serve the
most, under a p99 budget if given, measured on the embedded Triton; write the winner back.

Like ``bench`` it RUNS the repository's code (model.py files) in a real tritonserver.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from repo_builder.cli.bench import _input_files  # the [MODEL:]NAME=FILE form bench takes
from repo_builder.cli.options import (
    Output,
    check_quiet_verbose,
    load_generator_options,
    quiet_option,
    verbose_option,
)
from repo_builder.errors import UserError
from repo_builder.fsutil import write_text_atomic
from repo_builder.report import check_output, parse_record, write_report
from repo_builder.report.charts import require_plotting
from repo_builder.triton.perf_analyzer import choose
from repo_builder.tune import TuneRequest, TuneResult, tune_repository
from repo_builder.tune.runner import MeasureSettings
from repo_builder.tune.search import Budget, Objective


def format_table(result: TuneResult) -> str:
    """Every candidate, the Pareto front (*) and the winner (>)."""
    doc = result.document
    front = set(doc["pareto_front"])
    lines = [f"{result.model}: {len(doc['candidates'])} candidate(s), objective {doc['objective']}"
             + (f" (p99 <= {doc['p99_budget_ms']:g} ms)" if doc["p99_budget_ms"] is not None else "")
             + f", load generator: {doc.get('settings', {}).get('load_generator', 'python')}"]
    lines.append("      id   items/s  p50 ms  p99 ms  errors  load  setting (what differs from c0)")
    start = doc["candidates"][0]["knobs"]
    for c in doc["candidates"]:
        mark = ">" if c["id"] == doc["winner"] else ("*" if c["id"] in front else " ")
        changed = {k: v for k, v in c["knobs"].items() if start.get(k) != v}
        knobs = ", ".join(f"{k}={v}" for k, v in changed.items()) or "the repository as it was"
        lines.append(f"  {mark} {c['id']:>4}  {c['items_per_s']:>8.1f}  {c['p50_ms']:>6.1f}  {c['p99_ms']:>6.1f}  {c['errors']:>6}  {c.get('concurrency') or '':>4}  {knobs}")
    lines.append("  > winner   * Pareto front (no other candidate serves more at a lower p99)")
    confirmed = doc.get("confirmation")
    if confirmed:
        entrants = len(confirmed.get("entrants", ())) or 2
        lines.append(f"winner vs start, medians of {confirmed['rounds']} interleaved round(s) of {entrants} finalists: {confirmed['ratio']:.2f}x"
                     + (" (not above the noise: the start is kept)" if confirmed.get("kept_start") else "")
                     + ("" if confirmed.get("kept_start") or confirmed.get("climb_best_kept", True) else
                        " (a runner-up of the climb served more than its best when measured again)"))
    point = doc.get("operating_point")
    if point:
        tried = ", ".join(f"{p['concurrency']}: {p['items_per_s']:.1f}/s p99 {p['p99_ms']:.1f} ms" for p in point["points"])
        lines.append(f"the winner {'within the budget' if point.get('within_budget', True) else 'OVER the budget when measured again'}: "
                     f"{point['items_per_s']:.1f} items/s, p99 {point['p99_ms']:.1f} ms at concurrency {point['concurrency']} (search tried {tried})")
    return "\n".join(lines)


def _files_by_input(values: tuple[str, ...]) -> dict[str, list[bytes]]:
    files: dict[str, list[bytes]] = {}
    for file, contents in _input_files(values):  # tune measures one ensemble: a MODEL: prefix only documents it
        files.setdefault(file.name, []).append(contents)
    return files


@click.command(name="tune")
@click.argument("repository", type=click.Path(path_type=Path))
@click.option("--model", default=None, help="The ensemble clients call [default: the repository's only ensemble].")
@click.option("--p99-ms", type=click.FloatRange(min=0, min_open=True), default=None, help="Latency budget: the winner's p99 must stay under it [default: throughput only].")
@click.option("--concurrency", type=click.IntRange(min=1, max=256), default=4, show_default=True, help="Closed-loop clients while measuring (with --p99-ms: the first load tried).")
@click.option("--max-concurrency", type=click.IntRange(min=1, max=1024), default=64, show_default=True,
              help="With --p99-ms: each setting is served at twice, four times ... the best setting's load so far, up to this, while it keeps the budget and serves more.")
@click.option("--p99-margin", type=click.FloatRange(min=0.0, max=0.9), default=0.15, show_default=True,
              help="With --p99-ms: a higher load is taken only while p99 keeps this share of the budget free (p99 moves between windows).")
@click.option("--seconds", type=click.FloatRange(min=0.5), default=5.0, show_default=True, help="Measured window per candidate.")
@click.option("--warmup", type=click.FloatRange(min=0.0), default=1.0, show_default=True, help="Unmeasured requests first, per candidate.")
@click.option("--max-candidates", type=click.IntRange(min=1), default=16, show_default=True, help="Stop after measuring this many settings.")
@click.option("--max-seconds", type=click.FloatRange(min=1), default=600.0, show_default=True, help="Stop searching after this long.")
@click.option("--max-instances", type=click.IntRange(min=1, max=64), default=None, help="Most instances per step [default: the cores, at least 2].")
@click.option("--confirm-rounds", type=click.IntRange(min=0, max=10), default=2, show_default=True, help="Interleaved re-measurements of the finalists (0: take the climb's best as measured).")
@click.option("--finalists", type=click.IntRange(min=2, max=8), default=3, show_default=True, help="Settings re-measured in those rounds: the start, the climb's best and the next-best runners-up.")
@click.option("--input", "inputs", multiple=True, help="NAME=FILE: send FILE's bytes as input NAME (as bench does); other inputs are synthesized.")
@click.option("--dry-run", is_flag=True, help="Search and report; leave the repository unchanged.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write the search record (kind repo-builder.tune-search) to this file.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Also write the search as an HTML page (the 'report' extra).")
@click.option("--tritonserver", type=click.Path(path_type=Path), default=None, help="This tritonserver binary instead of the embedded one.")
@load_generator_options
@quiet_option
@verbose_option
def command(
    repository: Path, model: str | None, p99_ms: float | None, concurrency: int, max_concurrency: int, p99_margin: float, seconds: float, warmup: float,
    max_candidates: int, max_seconds: float, max_instances: int | None, confirm_rounds: int, finalists: int, inputs: tuple[str, ...],
    dry_run: bool, json_path: Path | None, report_path: Path | None, tritonserver: Path | None, load_generator: str,
    perf_analyzer: Path | None, quiet: bool, verbose: bool,
) -> int:
    """Search the steps' instances, threads and batching delays of an ensemble jointly; write the winner.

    Runs the repository's code (model.py files) in a real tritonserver: tune only repositories you trust.
    Exit 0 with a winner written (or --dry-run), 1 when no setting met the p99 budget.
    """
    check_quiet_verbose(quiet, verbose)
    out = Output(quiet=quiet, verbose=verbose)
    if report_path is not None:  # refused now, not after minutes of measuring
        check_output(report_path)
        require_plotting("tune --report")
    generator = choose(load_generator, perf_analyzer)
    if generator.note:
        out.progress(f"load generator: python ({generator.note})")
    request = TuneRequest(
        repository=repository, model=model, objective=Objective(p99_budget_ms=p99_ms, p99_margin=p99_margin),
        budget=Budget(max_candidates=max_candidates, max_seconds=max_seconds),
        measure=MeasureSettings(concurrency=concurrency, seconds=seconds, warmup=warmup, generator=generator),
        max_instances=max_instances, confirm_rounds=confirm_rounds, finalists=finalists, max_concurrency=max_concurrency, files=_files_by_input(inputs),
        write=not dry_run, tritonserver=str(tritonserver) if tritonserver else None,
    )
    result = tune_repository(request, out.progress)
    click.echo(format_table(result))
    if json_path is not None:
        try:
            write_text_atomic(json_path, json.dumps(result.document, indent=2) + "\n")
        except OSError as exc:
            raise UserError(f"{json_path}: cannot write the search record ({exc.strerror or exc})") from None
        out.progress(f"wrote {json_path} (the search record)")
    if report_path is not None:
        write_report([parse_record(result.document, str(json_path or repository), repository.name)], report_path, budget_ms=p99_ms)
        out.progress(f"wrote {report_path} (the HTML report)")
    feasible = request.objective.feasible(result.search.best)
    if not feasible:
        click.echo(f"no setting met the budget (p99 <= {p99_ms:g} ms); nothing written", err=True)
        return 1
    if result.written:
        click.echo(f"wrote the winner into {', '.join(result.written)} (config.pbtxt)", err=True)
    elif not dry_run:
        click.echo("the repository's own setting won; nothing to write", err=True)
    return 0
