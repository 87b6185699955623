#!/usr/bin/env python3
"""Benchmark: the generated pipelines served by the embedded Triton, against the published baselines.

Builds (random weights, no downloads) the ResNet50 pipeline as repo-builder tunes it, the same pipeline as
the previous default built it (one model instance on every core, spin-waiting on) and the tiny-BERT text
pipeline; deploys the baselines of baselines/ beside them on ONE server; loads everything over
tritonclient gRPC (closed loop, warm-up first); reads per-step queue/compute times from Triton's statistics
API; and measures the ceiling: the same ONNX and preprocessing in this process with onnxruntime at its best
batch size and threads. Ratios are measured in interleaved rounds (ours, baseline, ours, ...) and medians
are taken, because the machine is shared.

    .venv/bin/python scripts/bench/pipeline.py [--quick] [--json PATH] [--workdir DIR] [--no-report]

--quick checks that the benchmark runs (short windows, one round) in well under 3 minutes on 2 cores; it
never writes BENCHMARKS.md. The full run writes its BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
from _report import write_section  # noqa: E402
from accuracy import image_accuracy, load_step  # noqa: E402
from photos import SIZES, photos  # noqa: E402

from repo_builder.export.tiny_models import CORPUS  # noqa: E402
from repo_builder.render.tuning import available_cores, tune_model_step  # noqa: E402
from repo_builder.triton import bench  # noqa: E402

# Texts of in-vocabulary words: the tiny BERT's vocabulary is its corpus's words plus characters, so other words
# would split into characters (4-5x the tokens), which a real 30k-token vocabulary rarely does.
TEXT_WORDS = sorted({word for line in CORPUS for word in line.replace(",", " ").replace("!", " ").split() if word.isalnum()})
IMAGE, TEXT = "img", "txt"
DEFAULT = "img_default"  # the pipeline as the previous default built it


@dataclass(frozen=True)
class Plan:
    seconds: float
    warmup: float
    rounds: int
    sizes: tuple[str, ...]
    images_per_size: int
    concurrencies: tuple[int, ...]
    ceiling_grid: tuple[tuple[int, int, int], ...]  # (streams, intra-op threads, batch)
    accuracy_count: int
    perf_analyzer: Path | None = None
    work: Path = Path(".")


def make_plan(quick: bool, cores: int) -> Plan:
    if quick:
        return Plan(1.5, 0.5, 1, tuple(SIZES), 2, (1, 4, 16), ((1, cores, 4),), 1)
    grid = tuple((s, t, b) for s in (1, 2) for t in sorted({1, cores}) for b in (1, 4, 8))
    return Plan(8.0, 2.0, 3, tuple(SIZES), 8, (1, 4, 16), grid, 4)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def repo_builder(*args: str) -> None:
    command = [sys.executable, "-m", "repo_builder", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")


def set_parameter(config: Path, key: str, value: str) -> None:
    text = config.read_text()
    marker = f'key: "{key}"\n  value: {{ string_value: '
    start = text.index(marker) + len(marker)
    end = text.index("}", start)
    config.write_text(text[:start] + json.dumps(value) + " " + text[end:])


def prepare_repository(work: Path) -> Path:
    """Exports once, builds three pipelines from the exports, copies the baselines in; returns the repository."""
    repo = work / "repository"
    if (repo / IMAGE).is_dir():
        log(f"reusing {repo}")
        return repo
    log("exporting ResNet50 (random weights) and a tiny BERT text classifier")
    repo_builder("export", "resnet50", "--weights", "random", "--no-parity", "--out", str(work / "resnet50"))
    make_text_model(work / "tiny_bert")
    repo_builder("export", "text-classifier", "--model", str(work / "tiny_bert"), "--no-parity", "--out", str(work / "text"))
    common = ("--runtime", "python", "--out", str(repo))
    repo_builder("build", "resnet50", "--from-export", str(work / "resnet50"), "--name", IMAGE, *common)
    # The previous default: one model instance, ONNX Runtime's own thread count, spin-waiting on.
    repo_builder("build", "resnet50", "--from-export", str(work / "resnet50"), "--name", DEFAULT, "--instances", "1", "--intra-op-threads", "0", *common)
    set_parameter(repo / f"{DEFAULT}_model" / "config.pbtxt", "allow_spinning", "1")
    repo_builder("build", "text-classifier", "--from-export", str(work / "text"), "--name", TEXT, *common)
    for name in ("example_image_preprocess", "example_text_preprocess", "python_floor"):
        target = repo / name
        (target / "1").mkdir(parents=True)
        shutil.copy(HERE / "baselines" / name / "config.pbtxt", target / "config.pbtxt")
        shutil.copy(HERE / "baselines" / name / "model.py", target / "1" / "model.py")
    shutil.copytree(repo / f"{TEXT}_preprocess" / "1" / "tokenizer", repo / "example_text_preprocess" / "1" / "tokenizer")
    return repo


def make_text_model(folder: Path) -> None:
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    make_tiny_text_classifier(folder)


def image_payloads(size: str, count: int) -> list[bench.Payload]:
    return [{"IMAGE": (np.array([[data]], dtype=object), "BYTES")} for data in photos(size, count, seed=11)]


def text_payloads(count: int = 32) -> list[bench.Payload]:
    rng = np.random.default_rng(5)
    texts = [" ".join(rng.choice(TEXT_WORDS, size=int(rng.integers(8, 60)))) for _ in range(count)]
    return [{"TEXT": (np.array([[t.encode()]], dtype=object), "BYTES")} for t in texts]


def interleaved(server: Any, plan: Plan, models: dict[str, str], payloads: list[bench.Payload]) -> dict[str, Any]:
    """Rounds of (ours, baseline) at concurrency 4: medians of items/s and server compute ms per item."""
    runs: dict[str, list[tuple[bench.LoadResult, bench.StepStats]]] = {role: [] for role in models}
    for _ in range(plan.rounds):
        for role, model in models.items():
            result, steps = bench.measure(server.client, server.grpc_url, model, payloads, concurrency=4, seconds=plan.seconds, warmup=plan.warmup)
            runs[role].append((result, steps[0]))
    figures: dict[str, Any] = {}
    for role, items in runs.items():
        figures[role] = {
            "items_per_s": statistics.median(r.items_per_s for r, _ in items),
            "compute_ms": statistics.median(s.compute_ms for _, s in items),
            "item_ms": statistics.median(s.item_ms for _, s in items),
            "p50_ms": statistics.median(r.p50_ms for r, _ in items),
            "errors": sum(r.errors for r, _ in items),
            "first_error": next((r.first_error for r, _ in items if r.first_error), ""),
        }
    ours, base = figures["ours"]["items_per_s"], figures["baseline"]["items_per_s"]
    figures["ratio"] = ours / base if base else 0.0  # what clients get: items/s at concurrency 4
    ours_ms, base_ms = figures["ours"]["item_ms"], figures["baseline"]["item_ms"]
    figures["compute_ratio"] = base_ms / ours_ms if ours_ms else 0.0  # what one item costs the step, server side
    return figures


def with_models(server: Any, names: Sequence[str], work: Callable[[], Any]) -> Any:
    for name in names:
        server.load(name, timeout=300)
    try:
        return work()
    finally:
        for name in names:
            server.unload(name)


def image_phase(server: Any, plan: Plan) -> dict[str, Any]:
    models = {"ours": f"{IMAGE}_preprocess", "baseline": "example_image_preprocess"}

    def run() -> dict[str, Any]:
        figures = {}
        for size in plan.sizes:
            log(f"image preprocessing {size}: ours vs the published example")
            figures[size] = interleaved(server, plan, models, image_payloads(size, plan.images_per_size))
        return figures

    return with_models(server, list(models.values()), run)


def text_phase(server: Any, plan: Plan) -> dict[str, Any]:
    """Ours vs pad-to-512, and the floor every Python step pays (an echo step), in the same rounds."""
    models = {"ours": f"{TEXT}_preprocess", "baseline": "example_text_preprocess", "floor": "python_floor"}
    log("text preprocessing: ours vs pad-to-512, and the Python-step floor")
    return with_models(server, list(models.values()), lambda: interleaved(server, plan, models, text_payloads()))


def _per_text_ms(work: Callable[[], Any], texts: int, seconds: float) -> float:
    """Milliseconds per text of ``work`` (one call over ``texts`` texts), repeated for ``seconds``."""
    work()
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        work()
        calls += 1
    return elapsed / calls / texts * 1000.0


def _text_stages(ours: Any, ours_module: Any, base: Any, chosen: list[str]) -> dict[str, Callable[[], Any]]:
    """The stages timed for one batch of texts, ours and the baseline's, as each step's execute() runs them."""
    encodings = ours.encode(chosen)
    tokens = base.tokenizer(chosen, padding="max_length", max_length=512, truncation=True, return_tensors="np")
    return {
        "ours_tokenize": lambda: ours.encode(chosen),
        "ours_to_arrays": lambda: [np.array([getattr(e, f) for e in encodings], dtype=ours.dtypes[n]) for n, (f, _) in ours_module.OUTPUTS.items()],
        "baseline_tokenize_pad_512": lambda: base.tokenizer(chosen, padding="max_length", max_length=512, truncation=True, return_tensors="np"),
        "baseline_to_int64": lambda: [tokens[n].astype(np.int64) for n in ("input_ids", "attention_mask", "token_type_ids")],
    }


def text_profile(repo: Path, plan: Plan) -> dict[str, Any]:
    """Each side's tokenizing work in this process, stage by stage, per text (no Python backend around it).

    Ours: the generated step's own tokenizer (``encode``), then the conversion to one array per model input.
    The baseline: its ``transformers`` call padded to 512 (returning numpy), then ``astype(int64)``. The step
    around both (reading the request, ``pb_utils.Tensor`` per output, the stub's round trip) only runs inside
    Triton: the served figures and the echo floor show it."""
    ours_module = load_step(repo / f"{TEXT}_preprocess" / "1" / "model.py", "profile_text_ours")
    base_module = load_step(repo / "example_text_preprocess" / "1" / "model.py", "profile_text_baseline")
    ours, base = ours_module.TritonPythonModel(), base_module.TritonPythonModel()
    ours.initialize({"model_repository": str(repo / f"{TEXT}_preprocess"), "model_version": "1"})
    base.initialize({"model_repository": str(repo / "example_text_preprocess"), "model_version": "1"})
    texts = [p["TEXT"][0].reshape(-1)[0].decode() for p in text_payloads()]
    seconds = 0.2 if plan.rounds == 1 else 1.0
    profile: dict[str, Any] = {}
    for batch in (1, 4):
        chosen = texts[:batch]
        encodings = ours.encode(chosen)
        stages = _text_stages(ours, ours_module, base, chosen)
        rounds: dict[str, list[float]] = {key: [] for key in stages}
        for _ in range(plan.rounds):  # interleaved, like the served rounds
            for key, work in stages.items():
                rounds[key].append(_per_text_ms(work, batch, seconds))
        row: dict[str, Any] = {key: statistics.median(values) for key, values in rounds.items()}
        row["ours_ms"] = row["ours_tokenize"] + row["ours_to_arrays"]
        row["baseline_ms"] = row["baseline_tokenize_pad_512"] + row["baseline_to_int64"]
        row["ratio"] = row["baseline_ms"] / row["ours_ms"] if row["ours_ms"] else 0.0
        row["ours_tokens"] = len(encodings[0].ids)
        profile[f"batch_{batch}"] = row
        log(f"text profile, batch {batch}: ours {row['ours_ms']:.3f} ms/text, pad-to-512 {row['baseline_ms']:.3f}: {row['ratio']:.2f}x")
    return profile


def end_to_end_phase(server: Any, plan: Plan) -> dict[str, Any]:
    payloads = image_payloads("500x375", plan.images_per_size)
    steps = [f"{IMAGE}_preprocess", f"{IMAGE}_model", f"{IMAGE}_postprocess"]
    default_steps = [f"{DEFAULT}_preprocess", f"{DEFAULT}_model", f"{DEFAULT}_postprocess"]

    def run() -> dict[str, Any]:
        levels: list[dict[str, Any]] = []
        for concurrency in plan.concurrencies:
            log(f"end to end, concurrency {concurrency}")
            result, stats = bench.measure(server.client, server.grpc_url, IMAGE, payloads, concurrency=concurrency, seconds=plan.seconds, warmup=plan.warmup, steps=steps)
            slowest = bench.slowest_step(stats[1:])
            levels.append({**result.to_json(), "steps": [s.to_json() for s in stats], "slowest_step": slowest.model if slowest else None})
        log("tuned vs the previous default build, concurrency 4")
        rounds: dict[str, list[float]] = {"tuned": [], "default": []}
        profile: dict[str, Any] = {}
        for _ in range(plan.rounds):
            for role, name, members in (("tuned", IMAGE, steps), ("default", DEFAULT, default_steps)):
                result, stats = bench.measure(server.client, server.grpc_url, name, payloads, concurrency=4, seconds=plan.seconds, warmup=plan.warmup, steps=members)
                rounds[role].append(result.items_per_s)
                profile[role] = [s.to_json() for s in stats]
        tuned, default = statistics.median(rounds["tuned"]), statistics.median(rounds["default"])
        second = perf_analyzer(plan.perf_analyzer, server, plan, plan.work) if plan.perf_analyzer else None
        return {"perf_analyzer": second, "levels": levels, "tuned_vs_default": {"tuned_items_per_s": tuned, "default_items_per_s": default, "ratio": tuned / default if default else 0.0, "profile": profile}}

    return with_models(server, [IMAGE, DEFAULT], run)


def perf_analyzer(binary: Path, server: Any, plan: Plan, work: Path) -> dict[str, Any]:
    """perf_analyzer 2.51's view of the tuned ensemble at concurrency 4, as a second opinion.

    The binary comes from the tritonclient==2.51.0 wheel; LD_LIBRARY_PATH must reach libb64.so.0d and
    libcudart.so.12 (nvidia_pytriton.libs has both under hashed names)."""
    import base64
    import struct

    data = work / "perf_analyzer_input.json"
    images = photos("500x375", plan.images_per_size, seed=11)
    # b64 BYTES data is Triton's serialized form: each element prefixed by its length (uint32, little endian).
    encoded = [base64.b64encode(struct.pack("<I", len(image)) + image).decode() for image in images]
    data.write_text(json.dumps({"data": [{"IMAGE": {"b64": b64, "shape": [1]}} for b64 in encoded]}))
    command = [
        str(binary), "-m", IMAGE, "-i", "grpc", "-u", server.grpc_url, "--concurrency-range", "4",
        "--input-data", str(data), "--measurement-interval", str(int(plan.seconds * 1000)), "--stability-percentage", "50",
        "--max-trials", "4", "--percentile", "50",
    ]
    log("perf_analyzer, concurrency 4")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:  # a second opinion never sinks the benchmark
        return {"returncode": -1, "summary": [], "stderr": str(exc)}
    lines = [line.strip() for line in done.stdout.splitlines() if "Concurrency: 4" in line or "Throughput" in line or "p50 latency" in line]
    found = re.search(r"Concurrency: 4, throughput: ([0-9.]+) infer/sec", done.stdout)
    return {
        "returncode": done.returncode,
        "items_per_s": float(found.group(1)) if found else None,
        "summary": lines[-3:],
        "stderr": done.stderr[-500:] if done.returncode else "",
    }


def ceiling(repo: Path, plan: Plan) -> dict[str, Any]:
    """The same preprocessing and ONNX in this process, best (streams, threads, batch) of the grid."""
    import onnxruntime as ort  # heavy; only the ceiling needs it in this process

    module = load_step(repo / f"{IMAGE}_preprocess" / "1" / "model.py", "ceiling_preprocess")
    step = module.TritonPythonModel()
    step.initialize({})
    images = photos("500x375", plan.images_per_size, seed=11)
    model_file = str(repo / f"{IMAGE}_model" / "1" / "model.onnx")
    grid = []
    try:
        for streams, threads, batch in plan.ceiling_grid:
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = ort.InferenceSession(model_file, sess_options=options, providers=["CPUExecutionProvider"])
            rate = _in_process_rate(step, module, session, images, streams, batch, plan)
            grid.append({"streams": streams, "threads": threads, "batch": batch, "items_per_s": round(rate, 2)})
            log(f"ceiling: {streams} stream(s) x {threads} thread(s), batch {batch}: {rate:.1f} items/s")
    finally:
        step.finalize()
    best = max(grid, key=lambda g: g["items_per_s"])
    return {"best": best, "grid": grid}


def _in_process_rate(step: Any, module: Any, session: Any, images: list[bytes], streams: int, batch: int, plan: Plan) -> float:
    name = session.get_inputs()[0].name
    counts = [0] * streams
    stop = time.perf_counter() + plan.warmup + plan.seconds
    start_counting = time.perf_counter() + plan.warmup

    def loop(index: int) -> None:
        arrays = np.empty((batch, 3, module.CROP_HEIGHT, module.CROP_WIDTH), dtype=np.float32)
        offset = index
        while time.perf_counter() < stop:
            chosen = [images[(offset + i) % len(images)] for i in range(batch)]
            offset += batch
            list(step.pool.map(step.fill, [arrays] * batch, range(batch), chosen))
            session.run(None, {name: arrays})
            if time.perf_counter() >= start_counting:
                counts[index] += batch

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / plan.seconds


def accuracy(repo: Path, plan: Plan) -> dict[str, Any]:
    from torchvision.models import ResNet50_Weights  # heavy; the reference transforms

    return image_accuracy(repo / f"{IMAGE}_preprocess" / "1" / "model.py", ResNet50_Weights.IMAGENET1K_V2.transforms(), count=plan.accuracy_count, sizes=plan.sizes)


def above_floor(text: dict[str, Any]) -> float:
    """The text ratio once both sides stop paying the Python backend's per-execution floor (the echo step)."""
    floor = text["floor"]["item_ms"]
    ours, base = text["ours"]["item_ms"] - floor, text["baseline"]["item_ms"] - floor
    return base / ours if ours > 0 else 0.0


def text_bound(text: dict[str, Any]) -> float:
    floor = text["floor"]["item_ms"]
    return text["baseline"]["item_ms"] / floor if floor else 0.0


def figures_from(results: dict[str, Any]) -> dict[str, Any]:
    image = results["image_preprocess"]
    large = [image[s]["ratio"] for s in ("1920x1080", "4032x3024") if s in image]
    c4 = next(level for level in results["end_to_end"]["levels"] if level["concurrency"] == 4)
    best = results["ceiling"]["best"]["items_per_s"]
    second = results["end_to_end"].get("perf_analyzer")
    return {
        "image_preprocess_ratio": image["500x375"]["ratio"],
        "image_preprocess_ratio_large": min(large) if large else None,
        "image_preprocess_ratio_by_size": {size: round(f["ratio"], 3) for size, f in image.items()},
        # Both text steps answer faster than one Python gRPC client on 2 cores can ask (items/s is the
        # client's ceiling, the same for both), so the text ratio is the server's compute time per text.
        "text_preprocess_ratio": results["text_preprocess"]["compute_ratio"],
        "text_preprocess_throughput_ratio": results["text_preprocess"]["ratio"],
        "text_preprocess_ratio_above_floor": above_floor(results["text_preprocess"]),
        # The most any Python step could reach against the baseline served: baseline time / the echo floor.
        "text_preprocess_ratio_bound": text_bound(results["text_preprocess"]),
        # The tokenizing work alone, in process, one text per call (as the baseline is served).
        "text_preprocess_ratio_in_process": results["text_profile"]["batch_1"]["ratio"],
        "serving_efficiency": c4["items_per_s"] / best if best else 0.0,
        # perf_analyzer's C++ client leaves more of the 2 cores to the server than our Python client does.
        "serving_efficiency_perf_analyzer": (second or {}).get("items_per_s", 0) / best if (second or {}).get("items_per_s") and best else None,
        "tuned_vs_default": results["end_to_end"]["tuned_vs_default"]["ratio"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Short windows, one round: checks that the benchmark runs.")
    parser.add_argument("--json", type=Path, default=None, help="Write every figure here.")
    parser.add_argument("--workdir", type=Path, default=None, help="Keep exports and the repository here (reused when present).")
    parser.add_argument("--no-report", action="store_true", help="Do not write BENCHMARKS.md (a full run does by default).")
    parser.add_argument("--perf-analyzer", type=Path, default=None, help="perf_analyzer 2.51 binary: a second opinion on the ensemble.")
    args = parser.parse_args(argv)
    from repo_builder.triton import start_server

    cores = available_cores()
    plan = make_plan(args.quick, cores)
    started = time.perf_counter()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        repo = prepare_repository(work)
        plan = replace(plan, perf_analyzer=args.perf_analyzer, work=work)
        results: dict[str, Any] = {}
        load: dict[str, list[float]] = {}  # 1-minute load after each phase: other jobs come and go

        def phase(key: str, work: Callable[[], Any]) -> None:
            results[key] = work()
            load[key] = [round(x, 2) for x in os.getloadavg()]

        with start_server(repo, mode="explicit", startup_timeout=120.0) as server:
            phase("image_preprocess", lambda: image_phase(server, plan))
            phase("text_preprocess", lambda: text_phase(server, plan))
            phase("end_to_end", lambda: end_to_end_phase(server, plan))
        phase("text_profile", lambda: text_profile(repo, plan))
        phase("ceiling", lambda: ceiling(repo, plan))
        phase("accuracy", lambda: accuracy(repo, plan))
    results["figures"] = figures_from(results)
    results["machine"] = {
        "cores": cores,
        "tuning": tune_model_step(None, None).summary().split(" (")[0].removeprefix("model step: "),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "load_after_phase": load,
        "quick": args.quick,
        "seconds": round(time.perf_counter() - started, 1),
        "perf_analyzer": "run" if args.perf_analyzer else "not run (pass --perf-analyzer PATH; see docs/performance.md)",
    }
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=float))
    print(json.dumps(results["figures"], indent=2))
    if not args.quick and not args.no_report:
        from report_pipeline import markdown

        write_section("pipeline", markdown(results, plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
