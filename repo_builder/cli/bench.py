"""``repo-builder bench REPO``: serve a repository on the embedded Triton and measure what clients get.

Closed-loop gRPC clients at each concurrency (after a warm-up): requests/s, items/s, p50/p90/p99, and from
Triton's statistics API each ensemble step's queue and compute time, naming the slowest step. Like
``serve`` and ``validate --live`` it RUNS the repository's code (model.py files): bench only what you trust.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from repo_builder.errors import UserError
from repo_builder.pipelines.reference import bench_with_reference, format_family_bench
from repo_builder.triton import start_server
from repo_builder.triton.bench import ModelBench, bench_model, default_models


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
@click.option("--input", "inputs", multiple=True, help="NAME=FILE: send FILE's bytes as input NAME (repeat for several files, sent in turn). Other inputs are synthesized.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None, help="Write every figure to this JSON file.")
@click.option("--tritonserver", type=click.Path(path_type=Path), default=None, help="This tritonserver binary instead of the embedded one.")
@click.option("--reference", is_flag=True,
              help="Send the family's own reference inputs (one per request) and run its framework in this process on the same "
                   "inputs (family and checkpoint from repo-builder.json): texts/s, p50/p99 side by side (loads the checkpoint: trust it).")
@click.option("--reference-model", type=click.Path(path_type=Path), default=None,
              help="--reference: the checkpoint to run in process (default: the one the build recorded).")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="--reference: threads of the in-process run (default: every core).")
def command(
    repository: Path, models: tuple[str, ...], concurrency: tuple[int, ...], seconds: float, warmup: float,
    inputs: tuple[str, ...], json_path: Path | None, tritonserver: Path | None, reference: bool = False,
    reference_model: Path | None = None, threads: int | None = None,
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
    if not reference and (reference_model is not None or threads is not None):
        raise UserError("--reference-model and --threads go with --reference; add --reference")
    if reference and files:
        raise UserError("--reference sends the family's own inputs; drop --input")
    results: list[dict[str, Any]] = []
    errors = 0
    with start_server(repository, mode="explicit", tritonserver=str(tritonserver) if tritonserver else None) as server:
        for name in names:
            if reference:
                against = bench_with_reference(server, repository, name, concurrencies=concurrency, seconds=seconds, warmup=warmup,
                                               model=reference_model, threads=threads, log=_log)
                result = against.served
                click.echo(format_bench(result) + "\n" + format_family_bench(against))
                results.append({**result.to_json(), "reference": against.to_json()})
            else:
                result = bench_model(server, name, files, concurrency, seconds, warmup, _log)
                click.echo(format_bench(result))
                results.append(result.to_json())
            errors += sum(level.errors for level, _ in result.levels)
    if json_path is not None:
        json_path.write_text(json.dumps({"repository": str(repository), "models": results}, indent=2), encoding="utf-8")
    return 1 if errors else 0
