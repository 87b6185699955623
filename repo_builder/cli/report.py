"""``repo-builder report RESULT.json... -o report.html``: bench and tune results as one HTML page.

Several files are overlaid (before/after), each named by ``--label`` or by its file name. The page is
self-contained (inline SVG and CSS, no script) and written atomically: a bad file writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import click

from repo_builder.cli.options import Output, log_options
from repo_builder.errors import UserError
from repo_builder.report import check_output, load_record, write_report
from repo_builder.report.charts import require_plotting


def _labels(files: tuple[Path, ...], labels: tuple[str, ...]) -> list[str]:
    if len(labels) > len(files):
        raise UserError(f"--label: {len(labels)} labels for {len(files)} result files; give at most one per file, in order")
    names = [*labels, *(f.name for f in files[len(labels):])]
    # Two files of the same name (a/bench.json, b/bench.json): their paths tell them apart.
    names = [str(f) if i >= len(labels) and names.count(names[i]) > 1 else names[i] for i, f in enumerate(files)]
    if len(set(names)) < len(names):
        raise UserError("--label: two runs have the same label; give each file its own --label")
    return names


@click.command(name="report")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path), help="The HTML page to write.")
@click.option("--label", "labels", multiple=True, help="Name of each result file on the page, in order (repeatable; default: the file's name).")
@click.option("--p99-ms", "budget_ms", type=click.FloatRange(min=0, min_open=True), default=None, help="Latency budget: drawn as a line; the chosen configuration must meet it.")
@log_options
def command(results: tuple[Path, ...], out: Path, labels: tuple[str, ...], budget_ms: float | None, output: Output) -> int:
    """Draw bench --json results (and tune search records) as one self-contained HTML page.

    Several files are overlaid on the same charts, e.g. before and after a change.
    """
    check_output(out, results)
    require_plotting("repo-builder report")
    records = [load_record(path, label) for path, label in zip(results, _labels(results, labels), strict=True)]
    write_report(records, out, budget_ms=budget_ms)
    output.progress(f"wrote {out}")
    return 0
