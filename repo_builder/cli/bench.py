"""``repo-builder bench REPO``: serve a repository on the embedded Triton and measure what clients get.

Closed-loop gRPC clients at each concurrency (after a warm-up): requests/s, items/s, p50/p90/p99, and from
Triton's statistics API each ensemble step's queue and compute time, naming the slowest step. Like
``serve`` and ``validate --live`` it RUNS the repository's code (model.py files): bench only what you trust.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from repo_builder.cli.options import Output, check_output_file, load_generator_options, output_options
from repo_builder.errors import UserError
from repo_builder.live.request import InputFile, parse_input_file
from repo_builder.pipelines.reference import bench_with_reference, format_family_bench
from repo_builder.precision.gate import recorded_precision
from repo_builder.report import bench_document, check_output, parse_record, write_report
from repo_builder.report.charts import require_plotting
from repo_builder.report.run_info import repository_digest
from repo_builder.repository.manifest import read_manifest
from repo_builder.triton import start_server
from repo_builder.triton.bench import ModelBench, bench_model, default_models
from repo_builder.triton.bench_assets import SERVER_ARGS, asset_requests, needs_forwarding
from repo_builder.triton.bench_inputs import format_inputs
from repo_builder.triton.bench_limits import check_concurrency
from repo_builder.triton.perf_analyzer import LoadGenerator, choose


def _concurrencies(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, ...]:
    try:
        levels = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        raise UserError(f"--concurrency {value!r}: give whole numbers separated by commas, e.g. 1,4,16") from None
    if not levels or any(level < 1 for level in levels):
        raise UserError(f"--concurrency {value!r}: every level must be >= 1")
    check_concurrency(levels)  # before the server starts: the limit and why, at once
    return levels


def _input_files(values: Sequence[str]) -> tuple[tuple[InputFile, bytes], ...]:
    """``[MODEL:]NAME=FILE`` (repeatable), as ``validate --live --input`` takes them; read before any server starts."""
    read = []
    for file in (parse_input_file(v) for v in values):
        try:
            read.append((file, file.path.read_bytes()))
        except OSError as exc:
            raise UserError(f"--input {file.path}: cannot read it ({exc.strerror or exc})") from None
    return tuple(read)


def _files_for(model: str, files: Sequence[tuple[InputFile, bytes]]) -> dict[str, list[bytes]]:
    """Input name -> the bytes of each file given for it (FILE's bytes become one element, e.g. a JPEG for IMAGE)."""
    out: dict[str, list[bytes]] = {}
    for file, contents in files:
        if file.applies_to(model):
            out.setdefault(file.name, []).append(contents)
    return out


def format_bench(result: ModelBench) -> str:
    generators = sorted({level.load_generator for level, _ in result.levels})
    lines = [f"{result.model} (load generator: {', '.join(generators) or 'none'})"]
    if result.inputs:
        lines.append(f"  {format_inputs(list(result.inputs))}")
    lines += ["  conc  req/s  items/s  p50 ms  p90 ms  p99 ms  errors  slowest step (queue / compute ms per request, measured window)"]
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
@click.option("--input", "inputs", multiple=True, metavar="[MODEL:]NAME=FILE",
              help="Send FILE's bytes as input NAME (of MODEL, default: every model with that input); repeat for several "
                   "files, sent in turn. Other inputs are synthesized. For IMAGE_ASSET of a --nvcf-assets repository, "
                   "FILE is written under its asset root and sent as an asset id with the NVCF headers.")
@click.option("--json", "json_path", type=click.Path(path_type=Path, dir_okay=False), default=None, hidden=True,
              help="Also write every figure to this JSON file (kept for old scripts: --format json --output FILE).")
@click.option("--report", "report_path", type=click.Path(path_type=Path), default=None, help="Also write the results as one HTML page with charts (the 'report' extra).")
@click.option("--tritonserver", type=click.Path(path_type=Path), default=None, help="This tritonserver binary instead of the embedded one.")
@click.option("--reference", is_flag=True,
              help="Send the family's own reference inputs (one per request) and run its framework in this process on the same "
                   "inputs (family and checkpoint from repo-builder.json): texts/s, p50/p99 side by side (loads the checkpoint: trust it).")
@click.option("--reference-model", type=click.Path(path_type=Path), default=None,
              help="--reference: the checkpoint to run in process (default: the one the build recorded).")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="--reference: threads of the in-process run (default: every core).")
@load_generator_options
@output_options
def command(
    repository: Path, models: tuple[str, ...], concurrency: tuple[int, ...], seconds: float, warmup: float,
    inputs: tuple[str, ...], json_path: Path | None, report_path: Path | None, tritonserver: Path | None,
    reference: bool, reference_model: Path | None, threads: int | None, load_generator: str, perf_analyzer: Path | None,
    output: Output,
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
    _check_options(reference, reference_model, threads, bool(files), json_path, report_path)
    generator = _generator(load_generator, perf_analyzer, reference, output)
    digest = repository_digest(repository)  # before serving: what was measured
    results: list[dict[str, Any]] = []
    texts: list[str] = []
    errors = 0
    with contextlib.ExitStack() as stack:
        # Each model its own files ([MODEL:]NAME=FILE); NVCF asset files written under its asset root.
        plans = {name: stack.enter_context(asset_requests(repository, [name], _files_for(name, files)))[name] for name in names}
        server = stack.enter_context(start_server(
            repository, mode="explicit", tritonserver=str(tritonserver) if tritonserver else None,
            extra_args=SERVER_ARGS if needs_forwarding(plans) else (),  # NVCF assets: forward their headers
        ))
        server_version = server.client.get_server_metadata().version
        for name in names:
            if reference:
                against = bench_with_reference(server, repository, name, concurrencies=concurrency, seconds=seconds, warmup=warmup,
                                               model=reference_model, threads=threads, log=output.progress)
                result = against.served
                text = format_bench(result) + "\n" + format_family_bench(against)
                entry = {**result.to_json(), "reference": against.to_json()}
            else:
                result = bench_model(server, name, plans[name].files, concurrency, seconds, warmup, output.progress,
                                     headers=plans[name].headers, generator=generator)
                text, entry = format_bench(result), result.to_json()
            if output.json or output.path is not None:
                texts.append(text)
            else:
                click.echo(text)  # as each model finishes
            results.append(entry)
            errors += sum(level.errors for level, _ in result.levels)
    manifest = read_manifest(repository)
    precision = [f"{name}: {recorded_precision(manifest, name)}" for name in names if recorded_precision(manifest, name) != "fp32"]
    settings = {"concurrency": list(concurrency), "seconds": seconds, "warmup": warmup,
                **({"precision": precision} if precision else {}),  # the gate's figures beside the speed (docs/precision.md)
                "inputs": sorted({f.name for f, _ in files}) or "synthesized", "load_generator": generator.kind,
                **({"load_generator_note": generator.note} if generator.note else {})}
    document = bench_document(repository, results, settings=settings, server_version=server_version, digest=digest)
    for line in _write_results(document, texts, output, json_path, report_path, repository.name):
        output.progress(line)
    return 1 if errors else 0


def _generator(prefer: str, binary: Path | None, reference: bool, output: Output) -> LoadGenerator:
    """perf_analyzer when asked for or when it runs here; else the Python client, with one line saying why."""
    if reference:  # the family's inputs and its framework beside them: the Python client sends both sides' inputs
        if prefer == "perf_analyzer":
            raise UserError("--load-generator perf_analyzer: --reference measures with the Python client; drop one of them")
        return LoadGenerator("python", note="--reference measures with the Python client")
    generator = choose(prefer, binary)
    if generator.note:
        output.progress(f"load generator: python ({generator.note})")
    return generator


def _check_options(reference: bool, reference_model: Path | None, threads: int | None, has_files: bool,
                   json_path: Path | None, report_path: Path | None) -> None:
    """Refused now, not after minutes of measuring."""
    if not reference and (reference_model is not None or threads is not None):
        raise UserError("--reference-model and --threads go with --reference; add --reference")
    if reference and has_files:
        raise UserError("--reference sends the family's own inputs; drop --input")
    check_output_file(json_path)
    if report_path is not None:
        check_output(report_path, option="--report")
        require_plotting("bench --report")


def _write_results(document: dict[str, Any], texts: list[str], output: Output, json_path: Path | None,
                   report_path: Path | None, label: str) -> list[str]:
    """Write the results where asked; one line per file written, to print."""
    text = json.dumps(document, indent=2)
    wrote = []
    if output.json:
        output.report(text)
    elif output.path is not None:
        output.report("\n".join(texts))
    if output.path is not None:
        wrote.append(f"wrote {output.path} (the results as {'JSON' if output.json else 'text'})")
    if json_path is not None:
        Output(path=json_path).report(text)
        wrote.append(f"wrote {json_path} (the results as JSON)")
    if report_path is not None:
        write_report([parse_record(document, str(json_path or "not written (no --json)"), label)], report_path)
        wrote.append(f"wrote {report_path} (the HTML report)")
    return wrote
