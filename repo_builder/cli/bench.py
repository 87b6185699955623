"""``repo-builder bench REPO``: serve a repository on the embedded Triton and measure what clients get.

Closed-loop gRPC clients at each concurrency (after a warm-up): requests/s, items/s, p50/p90/p99, and from
Triton's statistics API each ensemble step's queue and compute time, naming the slowest step. Like
``serve`` and ``validate --live`` it RUNS the repository's code (model.py files): bench only what you trust.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from repo_builder.errors import UserError
from repo_builder.fsutil import write_json_atomic
from repo_builder.report import bench_document, check_output, parse_record, write_report
from repo_builder.report.charts import require_plotting
from repo_builder.report.run_info import repository_digest
from repo_builder.triton import start_server
from repo_builder.triton.bench import ModelBench, bench_model, default_models
from repo_builder.triton.bench_assets import SERVER_ARGS, asset_requests, needs_forwarding


def _log(message: str) -> None:
    click.echo(message, err=True)


def _concurrencies(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise UserError(f"--concurrency {value!r}: give whole numbers separated by commas, e.g. 1,4,16") from None
    if not levels or any(level < 1 for level in levels):
        raise UserError(f"--concurrency {value!r}: every level must be >= 1")
    return levels


def _input_files(values: Sequence[str]) -> dict[str, list[bytes]]:
    """``NAME=FILE`` (repeatable): FILE's bytes become one element of input NAME (e.g. a JPEG for IMAGE)."""
    files: dict[str, list[bytes]] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise UserError(f"--input {value!r}: expected NAME=FILE, e.g. IMAGE=photo.jpg")
        try:
            files.setdefault(name, []).append(Path(path).read_bytes())
        except OSError as exc:
            raise UserError(f"--input {value}: cannot read {path} ({exc.strerror or exc})") from None
    return files


def format_bench(result: ModelBench) -> str:
    lines = [f"{result.model}", "  conc  req/s  items/s  p50 ms  p90 ms  p99 ms  errors  slowest step (queue / compute ms per request)"]
    for row in result.to_json()["levels"]:
        slowest = next((s for s in row["steps"] if s["model"] == row["slowest_step"]), None)
        where = f"{slowest['model']} ({slowest['queue_ms']:.1f} / {slowest['compute_ms']:.1f})" if slowest else "-"
        lines.append(
            f"  {row['concurrency']:>4}  {row['requests_per_s']:>5.1f}  {row['items_per_s']:>7.1f}  {row['p50_ms']:>6.1f}"
            f"  {row['p90_ms']:>6.1f}  {row['p99_ms']:>6.1f}  {row['errors']:>6}  {where}"
        )
        if row.get("first_error"):
            lines.append(f"        first error: {row['first_error']}")
    return "\n".join(lines)


@click.command(name="bench")
@click.argument("repository", type=click.Path(path_type=Path))
@click.option("--model", "models", multiple=True, help="Model to load and measure (repeatable; default: every ensemble, else every model).")
@click.option("--concurrency", default="1,4,16", show_default=True, callback=_concurrencies, help="Closed-loop clients, comma-separated levels.")
@click.option("--seconds", type=click.FloatRange(min=0.1), default=10.0, show_default=True, help="Measured window per level.")
@click.option("--warmup", type=click.FloatRange(min=0.0), default=2.0, show_default=True, help="Unmeasured requests first, per level.")
@click.option("--input", "inputs", multiple=True, help="NAME=FILE: send FILE's bytes as input NAME (repeat for several files, sent in turn). Other inputs are synthesized. "
              "For IMAGE_ASSET of a --nvcf-assets repository, FILE is written under its asset root and sent as an asset id with the NVCF headers.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write every figure to this JSON file.")
@click.option("--report", "report_path", type=click.Path(path_type=Path), default=None, help="Also write the results as one HTML page with charts (the 'report' extra).")
@click.option("--tritonserver", type=click.Path(path_type=Path), default=None, help="This tritonserver binary instead of the embedded one.")
def command(
    repository: Path, models: tuple[str, ...], concurrency: tuple[int, ...], seconds: float, warmup: float,
    inputs: tuple[str, ...], json_path: Path | None, report_path: Path | None, tritonserver: Path | None,
) -> int:
    """Measure a model repository served by Triton: throughput, latency percentiles, the slowest step.

    Runs the repository's code (model.py files) in a real tritonserver: bench only repositories you trust.
    """
    if not repository.is_dir():
        raise UserError(f"{repository}: not a folder; pass a model repository (e.g. the --out of 'repo-builder build')")
    files = _input_files(inputs)
    names = models or default_models(repository)
    if not names:
        raise UserError(f"{repository}: no model folder with a config.pbtxt; build one with 'repo-builder build'")
    if report_path is not None:  # refused now, not after minutes of measuring
        check_output(report_path, option="--report")
        require_plotting("bench --report")
    digest = repository_digest(repository)  # before serving: what was measured
    results: list[dict[str, Any]] = []
    errors = 0
    with asset_requests(repository, names, files) as plans, start_server(
        repository, mode="explicit", tritonserver=str(tritonserver) if tritonserver else None,
        extra_args=SERVER_ARGS if needs_forwarding(plans) else (),  # NVCF assets: forward their headers
    ) as server:
        server_version = server.client.get_server_metadata().version
        for name in names:
            result = bench_model(server, name, plans[name].files, concurrency, seconds, warmup, _log, headers=plans[name].headers)
            click.echo(format_bench(result))
            results.append(result.to_json())
            errors += sum(level.errors for level, _ in result.levels)
    settings = {"concurrency": list(concurrency), "seconds": seconds, "warmup": warmup, "inputs": sorted(files) or "synthesized"}
    document = bench_document(repository, results, settings=settings, server_version=server_version, digest=digest)
    if json_path is not None:
        write_json_atomic(json_path, document)
    if report_path is not None:
        write_report([parse_record(document, str(json_path or "not written (no --json)"), repository.name)], report_path)
    return 1 if errors else 0
