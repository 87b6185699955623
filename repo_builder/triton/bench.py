"""Load a served model over gRPC at a fixed concurrency and read where the time went.

Closed loop: ``concurrency`` threads each send one request, wait for its answer, send the next. After a
warm-up, every answer within the measured window counts; Triton's statistics API (read before and after)
splits the time per step of an ensemble into queueing and compute, which names the slowest step.
``tritonclient.grpc`` and numpy are imported inside the functions, like everywhere under triton/.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import ToolError, UserError
from repo_builder.triton.bench_inputs import describe_payload
from repo_builder.triton.bench_limits import PROGRESS_FROM, start_progress
from repo_builder.triton.client import connect, error_text, grpc_module
from repo_builder.triton.perf_analyzer import LoadGenerator, run_level
from repo_builder.triton.synthesize import request_shape, synthesize_inputs
from repo_builder.triton_config import read_config_file
from repo_builder.triton_layout import CONFIG_FILE

PROGRESS_SECONDS = 5.0  # a progress line this often while a big level runs

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig

# One request: input name -> (array, wire type). A workload is a few of them, sent in turn.
Payload = Mapping[str, tuple[Any, str]]


@dataclass(frozen=True)
class LoadResult:
    model: str
    concurrency: int
    requests: int
    items: int  # requests x the batch each carries
    seconds: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    errors: int = 0
    first_error: str = ""
    load_generator: str = "python"  # or "perf_analyzer" (triton/perf_analyzer.py)

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def items_per_s(self) -> float:
        return self.items / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "concurrency": self.concurrency,
            "requests": self.requests,
            "items": self.items,
            "seconds": round(self.seconds, 3),
            "requests_per_s": round(self.requests_per_s, 2),
            "items_per_s": round(self.items_per_s, 2),
            "p50_ms": round(self.p50_ms, 2),
            "p90_ms": round(self.p90_ms, 2),
            "p99_ms": round(self.p99_ms, 2),
            "errors": self.errors,
            "load_generator": self.load_generator,
            **({"first_error": self.first_error} if self.first_error else {}),
        }


@dataclass(frozen=True)
class StepStats:
    """One model's share of a run: per request, mean time queued and computing (input + infer + output)."""

    model: str
    requests: int
    executions: int
    queue_ms: float
    compute_ms: float
    item_ms: float = 0.0  # execution compute time per item (batch_stats): what one item costs the step

    @property
    def mean_batch(self) -> float:
        return self.requests / self.executions if self.executions else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "requests": self.requests,
            "executions": self.executions,
            "mean_batch": round(self.mean_batch, 2),
            "queue_ms": round(self.queue_ms, 3),
            "compute_ms": round(self.compute_ms, 3),
            "item_ms": round(self.item_ms, 3),
        }


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
    return ordered[rank]


def _infer_inputs(payload: Payload) -> list[Any]:
    grpc = grpc_module()
    inputs = []
    for name, (array, wire) in payload.items():
        tensor = grpc.InferInput(name, list(array.shape), wire)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


class _Worker:
    """One closed-loop client: its own gRPC channel, its own latencies (no lock on the hot path)."""

    def __init__(self, url: str, model: str, payloads: Sequence[list[Any]], offset: int, headers: Mapping[str, str] | None = None) -> None:
        self.client = connect(url)
        self.headers = dict(headers) if headers else None  # NVCF asset headers (bench --input IMAGE_ASSET=...)
        self.model, self.payloads, self.index = model, payloads, offset
        self.latencies: list[float] = []
        self.errors = 0
        self.first_error = ""
        self.last_end = 0.0

    def loop(self, measure_from: float, stop_at: float, hard_stop: float) -> None:
        """Until ``stop_at``, and past it (up to ``hard_stop``) until this client has one answer in the window,
        so a slow model still gets a figure from a short window."""
        while True:
            start = time.perf_counter()
            if start >= hard_stop or (start >= stop_at and self.latencies):
                return
            inputs = self.payloads[self.index % len(self.payloads)]
            self.index += 1
            try:
                self.client.infer(self.model, inputs, client_timeout=120.0, headers=self.headers)
            except Exception as exc:  # a failed request is counted and reported, not fatal
                self.errors += 1
                self.first_error = self.first_error or error_text(exc)
                continue
            end = time.perf_counter()
            if end >= measure_from:  # answered inside the window: counts, whenever it was sent
                self.latencies.append(end - start)
                self.last_end = end


def _wait(threads: Sequence[threading.Thread], stop_at: float, log: Callable[[str], None] | None) -> None:
    """Join every client; with ``log``, a line every ``PROGRESS_SECONDS`` while they run."""
    for thread in threads:
        while thread.is_alive():
            thread.join(PROGRESS_SECONDS if log is not None else None)
            if log is not None and thread.is_alive():
                left = stop_at - time.perf_counter()
                log(f"  measuring: {left:.0f} s left" if left > 0 else "  waiting for the last answers")


def run_load(
    url: str,
    model: str,
    payloads: Sequence[Payload],
    *,
    concurrency: int,
    seconds: float,
    warmup: float,
    items_per_request: int = 1,
    headers: Mapping[str, str] | None = None,
    log: Callable[[str], None] | None = None,
    on_measuring: Callable[[], None] | None = None,
) -> LoadResult:
    """``concurrency`` closed-loop clients for ``warmup + seconds``; only the last ``seconds`` count. ``log``
    gets progress on levels that take a while (``bench_limits.PROGRESS_FROM`` clients or more);
    ``on_measuring`` is called once as the warm-up ends and the measured window begins."""
    if concurrency < 1 or seconds <= 0:
        raise ValueError("concurrency must be >= 1 and seconds > 0")
    prepared = [_infer_inputs(p) for p in payloads]
    started = start_progress(concurrency, log)
    workers = []
    for i in range(concurrency):
        workers.append(_Worker(url, model, prepared, offset=i, headers=headers))
        started(i + 1)
    measure_from = time.perf_counter() + warmup
    stop_at = measure_from + seconds
    hard_stop = stop_at + max(60.0, seconds)
    threads = [threading.Thread(target=w.loop, args=(measure_from, stop_at, hard_stop), daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    if on_measuring is not None:
        time.sleep(max(0.0, measure_from - time.perf_counter()))
        on_measuring()
    _wait(threads, stop_at, log if concurrency >= PROGRESS_FROM else None)
    for worker in workers:
        worker.client.close()
    latencies = [value * 1000.0 for w in workers for value in w.latencies]
    errors = sum(w.errors for w in workers)
    first_error = next((w.first_error for w in workers if w.first_error), "")
    # Answers counted until the last client stopped: the window a slow model stretched, else ``seconds``.
    window = max([stop_at, *(w.last_end for w in workers)]) - measure_from
    return LoadResult(
        model=model,
        concurrency=concurrency,
        requests=len(latencies),
        items=len(latencies) * items_per_request,
        seconds=window,
        p50_ms=percentile(latencies, 0.50),
        p90_ms=percentile(latencies, 0.90),
        p99_ms=percentile(latencies, 0.99),
        errors=errors,
        first_error=first_error,
    )


def statistics(client: Any) -> dict[str, dict[str, int]]:
    """model name -> cumulative counters (nanoseconds and counts) from Triton's statistics API."""
    answer = client.get_inference_statistics(model_name="", as_json=True)
    snapshot: dict[str, dict[str, int]] = {}
    for entry in answer.get("model_stats", []):
        stats = entry.get("inference_stats", {})

        def ns(key: str, stats: Mapping[str, Any] = stats) -> int:
            return int(stats.get(key, {}).get("ns", 0))

        # batch_stats count each execution once (inference_stats count it once per request it served).
        batches = entry.get("batch_stats", [])
        snapshot[entry["name"]] = {
            "requests": int(stats.get("success", {}).get("count", 0)),
            "executions": int(entry.get("execution_count", 0)),
            "queue_ns": ns("queue"),
            "compute_ns": ns("compute_input") + ns("compute_infer") + ns("compute_output"),
            "batch_items": sum(int(b.get("batch_size", 0)) * int(b.get("compute_infer", {}).get("count", 0)) for b in batches),
            "batch_compute_ns": sum(
                int(b.get(key, {}).get("ns", 0)) for b in batches for key in ("compute_input", "compute_infer", "compute_output")
            ),
        }
    return snapshot


def settled_statistics(client: Any, quiet: float = 0.3, timeout: float = 10.0) -> dict[str, dict[str, int]]:
    """``statistics`` once they have not changed for ``quiet`` seconds (or at ``timeout``), for a snapshot taken
    with nothing in flight. Triton records a model's statistics after its ``execute`` returns, which can be after
    the client (or a BLS caller) already has the response: a snapshot read at once can miss the last execution,
    which the next window then counts as its own."""
    deadline = time.monotonic() + timeout
    last = statistics(client)
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = statistics(client)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last


def step_stats(before: Mapping[str, Mapping[str, int]], after: Mapping[str, Mapping[str, int]], models: Sequence[str]) -> tuple[StepStats, ...]:
    """Per model, what happened between two ``statistics`` snapshots."""
    steps = []
    empty = {"requests": 0, "executions": 0, "queue_ns": 0, "compute_ns": 0, "batch_items": 0, "batch_compute_ns": 0}
    for name in models:
        now, then = after.get(name, empty), before.get(name, empty)
        delta = {key: now[key] - then[key] for key in empty}
        count = delta["requests"]
        steps.append(
            StepStats(
                model=name,
                requests=count,
                executions=delta["executions"],
                queue_ms=delta["queue_ns"] / count / 1e6 if count else 0.0,
                compute_ms=delta["compute_ns"] / count / 1e6 if count else 0.0,
                item_ms=delta["batch_compute_ns"] / delta["batch_items"] / 1e6 if delta["batch_items"] else 0.0,
            )
        )
    return tuple(steps)


def slowest_step(steps: Sequence[StepStats]) -> StepStats | None:
    """The step whose requests spent the most time computing (queueing is the next step's symptom)."""
    busy = [s for s in steps if s.requests]
    return max(busy, key=lambda s: s.compute_ms) if busy else None


def ensemble_members(config: ModelConfig) -> tuple[str, ...]:
    """Step model names of an ensemble ``ModelConfig`` (empty for any other model)."""
    return tuple(step.model_name for step in config.ensemble_scheduling.step)


def measure(
    client: Any,
    url: str,
    model: str,
    payloads: Sequence[Payload],
    *,
    concurrency: int,
    seconds: float,
    warmup: float,
    items_per_request: int = 1,
    steps: Sequence[str] = (),
    on_done: Callable[[LoadResult], None] | None = None,
    headers: Mapping[str, str] | None = None,
    log: Callable[[str], None] | None = None,
    generator: LoadGenerator | None = None,
    batch: int = 0,
) -> tuple[LoadResult, tuple[StepStats, ...]]:
    """``run_load`` (or perf_analyzer, when ``generator`` is it) with the statistics of ``model`` and its ``steps``
    over the measured window only, as the headline: the snapshot they start from is read as the warm-up ends.
    perf_analyzer cannot say when its own warm-up ends, so it is warmed by the Python client first and runs
    none of its own. ``batch``: rows per request when the model batches, else 0."""
    window: dict[str, dict[str, dict[str, int]]] = {}

    def window_starts() -> None:
        window["before"] = statistics(client)

    if generator is not None and generator.kind == "perf_analyzer" and not headers:
        if warmup > 0:  # unmeasured, as the Python client's own warm-up
            run_load(url, model, payloads, concurrency=concurrency, seconds=warmup, warmup=0.0, items_per_request=items_per_request)
        window_starts()
        result = perf_analyzer_level(generator, url, model, payloads, concurrency=concurrency, seconds=seconds, warmup=0.0,
                                     items_per_request=items_per_request, batch=batch)
    else:
        result = run_load(url, model, payloads, concurrency=concurrency, seconds=seconds, warmup=warmup,
                          items_per_request=items_per_request, headers=headers, log=log, on_measuring=window_starts)
    before = window.get("before") or {}
    after = statistics(client)
    if on_done is not None:
        on_done(result)
    return result, step_stats(before, after, (model, *steps))


def measure_or_fall_back(
    client: Any, url: str, model: str, payloads: Sequence[Payload], *, generator: LoadGenerator,
    on_fallback: Callable[[ToolError], None], **window: Any,
) -> tuple[LoadResult, tuple[StepStats, ...], LoadGenerator]:
    """``measure`` through ``generator``; when perf_analyzer fails (a ``ToolError``), the same window is measured with
    the Python client instead, so one failure costs a measurement its generator, never the run: ``on_fallback``
    hears why (to record it), and the generator that measured is returned beside the figures."""
    try:
        return (*measure(client, url, model, payloads, generator=generator, **window), generator)
    except ToolError as exc:
        if generator.kind != "perf_analyzer":
            raise
        on_fallback(exc)
        python = LoadGenerator("python", note=f"perf_analyzer failed: {' '.join(str(exc).split())[:300]}")
        return (*measure(client, url, model, payloads, generator=python, **window), python)


def perf_analyzer_level(
    generator: LoadGenerator, url: str, model: str, payloads: Sequence[Payload], *,
    concurrency: int, seconds: float, warmup: float, items_per_request: int, batch: int,
) -> LoadResult:
    """One level measured by perf_analyzer, as a ``LoadResult``. Its report gives rates, not counts: requests
    and items are its throughput over ``seconds`` (the time its three measurement windows cover)."""
    row = run_level(generator, url, model, payloads, concurrency=concurrency, seconds=seconds, warmup=warmup, batch=batch)
    items = round(row.infer_per_s * seconds)
    return LoadResult(
        model=model, concurrency=concurrency, requests=round(items / max(1, items_per_request)), items=items, seconds=seconds,
        p50_ms=row.p50_us / 1000.0, p90_ms=row.p90_us / 1000.0, p99_ms=row.p99_us / 1000.0, load_generator="perf_analyzer",
    )


@dataclass(frozen=True)
class ModelBench:
    """Every concurrency level of one model: its load figures, its steps, the slowest step."""

    model: str
    levels: tuple[tuple[LoadResult, tuple[StepStats, ...]], ...]
    inputs: tuple[dict[str, Any], ...] = ()  # what the first request carried (bench_inputs.describe_payload)

    def to_json(self) -> dict[str, Any]:
        out = []
        for result, steps in self.levels:
            slowest = slowest_step(steps[1:] or steps)
            out.append({**result.to_json(), "steps": [s.to_json() for s in steps], "slowest_step": slowest.model if slowest else None})
        return {"model": self.model, **({"inputs": list(self.inputs)} if self.inputs else {}), "levels": out}


def config_on_disk(repository: Path, name: str) -> ModelConfig | None:
    """The model's config.pbtxt, read as offline validate reads it (a regular file inside the repository,
    at most MAX_CONFIG_BYTES); None when it does not parse (the server says why when it loads the model)."""
    path = repository / name / CONFIG_FILE
    config, text, problem, _, _ = read_config_file(path, repository)
    if config is None and text is None and problem is not None:  # unreadable: too big, a FIFO, a link out
        raise UserError(f"{path}: {problem}; fix that model's {CONFIG_FILE} or pass --model NAME to bench the others")
    return config


def default_models(repository: Path) -> tuple[str, ...]:
    """What a client calls: the ensembles, or every model when there is none (sorted)."""
    names = sorted(p.name for p in repository.iterdir() if p.is_dir() and (p / "config.pbtxt").is_file())
    ensembles = [n for n in names if getattr(config_on_disk(repository, n), "platform", "") == "ensemble"]
    return tuple(ensembles or names)


def payloads_for(config: ModelConfig, files: Mapping[str, Sequence[bytes]]) -> list[Payload]:
    """One request per file given for an input (cycled), other inputs synthesized from the config."""
    import numpy as np

    synthesized = {s.name: (s.array, s.wire) for s in synthesize_inputs(config)}
    unknown = sorted(set(files) - set(synthesized))
    if unknown:
        raise UserError(f"--input {unknown[0]}: model '{config.name}' has no such input (it has {', '.join(synthesized)})")
    # Optional inputs are sent only when given (IMAGE or IMAGE_ASSET, never both); with none given and
    # nothing required, the first input is synthesized.
    keep = {t.name for t in config.input if not t.optional} | set(files)
    if config.input and not keep:
        keep = {config.input[0].name}
    synthesized = {name: value for name, value in synthesized.items() if name in keep}
    dims = {t.name: list(t.dims) for t in config.input}
    count = max([len(v) for v in files.values()] or [1])
    payloads: list[Payload] = []
    for index in range(count):
        payload = dict(synthesized)
        for name, contents in files.items():
            shape = request_shape(dims[name], config.max_batch_size)
            payload[name] = (np.full(shape, contents[index % len(contents)], dtype=object), "BYTES")
        payloads.append(payload)
    return payloads


def bench_model(
    server: Any, name: str, files: Mapping[str, Sequence[bytes]], concurrencies: Sequence[int], seconds: float, warmup: float,
    log: Callable[[str], None], payloads: Sequence[Payload] | None = None, headers: Mapping[str, str] | None = None,
    generator: LoadGenerator | None = None,
) -> ModelBench:
    """Load ``name`` (an ensemble loads its steps), then measure it at each concurrency; ``payloads``: the
    requests to send in turn (a family's reference inputs), else ``files`` and synthesized inputs; ``headers``
    go with every request (NVCF assets); ``generator``: perf_analyzer when it runs (requests with headers always
    go through the Python client: perf_analyzer sends no gRPC metadata)."""
    server.load(name, timeout=300)
    config = server.client.get_model_config(name).config
    given = set(files)
    if payloads:
        payloads, default_source = list(payloads), "reference"
    else:
        payloads, default_source = payloads_for(config, files), "synthesized"
    inputs = tuple(describe_payload(payloads[0], given, default_source))
    steps = ensemble_members(config)
    items = max(1, int(payloads[0][next(iter(payloads[0]))][0].shape[0])) if config.max_batch_size > 0 else 1
    levels = []
    for concurrency in concurrencies:
        log(f"{name}: concurrency {concurrency}, {warmup:g} s warm-up then {seconds:g} s")
        levels.append(
            measure(server.client, server.grpc_url, name, payloads, concurrency=concurrency, seconds=seconds, warmup=warmup, items_per_request=items, steps=steps,
                    headers=headers, log=log, generator=generator, batch=items if config.max_batch_size > 0 else 0)
        )
    return ModelBench(name, tuple(levels), inputs)
