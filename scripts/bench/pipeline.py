#!/usr/bin/env python3
"""Benchmark: the generated pipelines served by the embedded Triton, against the published baselines.

Builds (random weights, no downloads) the ResNet50 pipeline as repo-builder tunes it, the same pipeline as
the previous default built it (one model instance on every core, spin-waiting on) and the tiny-BERT text
pipeline; deploys the baselines of baselines/ beside them on ONE server; loads everything over
tritonclient gRPC (closed loop, warm-up first); reads per-step queue/compute times from Triton's statistics
API; and measures the ceiling: the same ONNX and preprocessing in this process with onnxruntime at its best
batch size and threads. Every ratio is measured in interleaved rounds (ours, baseline, ours, ...; the
served ensemble and the ceiling alike) and judged by its spread over the rounds (rounds.py): met, missed,
or unsettled when the spread crosses the target. The load generator is perf_analyzer when it runs here,
else the Python gRPC client, and the JSON says which (with the reason).

    .venv/bin/python scripts/bench/pipeline.py [--quick] [--json PATH] [--workdir DIR] [--no-report]
        [--load-generator auto|perf_analyzer|python] [--perf-analyzer PATH] [--tune-seconds S]
        [--model-analyzer-json PATH | --model-analyzer]

tune_vs_model_analyzer, tune_seconds and model_analyzer_seconds come from scripts/bench/model_analyzer.py: its
result file (--model-analyzer-json) or a run of it on the text pipeline (--model-analyzer); without either,
the first two are null with the reason and tune_seconds is this script's own dry-run tune.

``--json`` writes every figure; ``figures`` holds the issue's keys (text_preprocess_ratio, serving_efficiency,
tune_vs_model_analyzer, tune_seconds, model_analyzer_seconds, dali_mean_abs_diff, dali_max_abs_diff,
image_preprocess_ratio, image_preprocess_ratio_large, tuned_vs_default), each in rounds.py's shape:
``{"value", "rounds", "spread", "target", "better", "status", "note", "load", ...}``.

--quick checks that the benchmark runs (short windows, one round) in well under 3 minutes on 2 cores; it
never writes BENCHMARKS.md. The full run writes its BENCHMARKS.md section.
"""

from __future__ import annotations

import argparse
import json
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
from rounds import figure, machine_load, not_measured, ratios  # noqa: E402

from repo_builder.errors import ToolError  # noqa: E402
from repo_builder.export.tiny_models import CORPUS  # noqa: E402
from repo_builder.render.tuning import available_cores, tune_model_step  # noqa: E402
from repo_builder.triton import bench  # noqa: E402
from repo_builder.triton.perf_analyzer import LoadGenerator, choose  # noqa: E402

# Texts of in-vocabulary words: the tiny BERT's vocabulary is its corpus's words plus characters, so other words
# would split into characters (4-5x the tokens), which a real 30k-token vocabulary rarely does.
TEXT_WORDS = sorted({word for line in CORPUS for word in line.replace(",", " ").replace("!", " ").split() if word.isalnum()})
IMAGE, TEXT = "img", "txt"
DEFAULT = "img_default"  # the pipeline as the previous default built it
PILLOW = "img_pillow"  # IMAGE resizes with torch (--resize-with torch); this is the default Pillow step beside it


UNCHOSEN = LoadGenerator("python", note="not chosen yet")  # main() chooses before anything is measured


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
    tune_seconds: float = 60.0  # repo-builder tune's search budget on the text pipeline
    quick: bool = False
    generator: LoadGenerator = UNCHOSEN
    work: Path = Path(".")


def make_plan(quick: bool, cores: int) -> Plan:
    if quick:
        # Served at two sizes (each size's windows cost the same time whatever its photos); accuracy at all three.
        return Plan(0.8, 0.3, 1, ("500x375", "1920x1080"), 2, (1, 4, 16), ((1, cores, 4),), 1, tune_seconds=15.0, quick=True)
    # Batch 2 and four streams: the configurations with at most 4 images in flight, the served load's own bound.
    grid = tuple((s, t, b) for s in (1, 2) for t in sorted({1, cores}) for b in (1, 2, 4, 8)) + tuple((4, t, 1) for t in sorted({1, cores}))
    return Plan(8.0, 2.0, 3, tuple(SIZES), 8, (1, 4, 16), grid, 4)


FALLBACKS: list[str] = []  # measurements perf_analyzer failed, each then taken with the Python client


def served(server: Any, plan: Plan, model: str, payloads: list[bench.Payload], concurrency: int = 4,
           steps: Sequence[str] = ()) -> tuple[bench.LoadResult, tuple[bench.StepStats, ...]]:
    """One closed-loop window through the plan's load generator (every model here batches; a request is one row).
    A perf_analyzer failure costs that one measurement its generator, not the benchmark: the Python client takes
    it, the JSON says so (each level's ``load_generator``; ``machine.perf_analyzer_failures``)."""
    def fell_back(exc: ToolError) -> None:
        log(f"{exc}; this measurement with the Python client")
        FALLBACKS.append(f"{model} at concurrency {concurrency}: {exc}")

    result, stats, _ = bench.measure_or_fall_back(server.client, server.grpc_url, model, payloads, generator=plan.generator,
                                                  on_fallback=fell_back, concurrency=concurrency, seconds=plan.seconds,
                                                  warmup=plan.warmup, steps=steps, batch=1)
    return result, stats


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


# Baselines whose model.py is another's, told apart by a config parameter.
MODEL_PY_FROM = {"python_image_draft_floor": "python_image_decode_floor"}


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
    # Served here on the builder's own Python: nothing to ship (torch, which --resize-with torch imports, never is).
    common = ("--runtime", "python", "--out", str(repo), "--step-packages", "dockerfile")
    repo_builder("build", "resnet50", "--from-export", str(work / "resnet50"), "--name", IMAGE, "--resize-with", "torch", *common)
    repo_builder("build", "resnet50", "--from-export", str(work / "resnet50"), "--name", PILLOW, *common)
    # The previous default: one model instance, ONNX Runtime's own thread count, spin-waiting on.
    repo_builder("build", "resnet50", "--from-export", str(work / "resnet50"), "--name", DEFAULT, "--instances", "1", "--intra-op-threads", "0", *common)
    set_parameter(repo / f"{DEFAULT}_model" / "config.pbtxt", "allow_spinning", "1")
    repo_builder("build", "text-classifier", "--from-export", str(work / "text"), "--name", TEXT, *common)
    for name in ("example_image_preprocess", "example_text_preprocess", "python_floor", "python_image_floor", "python_image_decode_floor",
                 "python_image_draft_floor"):
        target = repo / name
        (target / "1").mkdir(parents=True)
        shutil.copy(HERE / "baselines" / name / "config.pbtxt", target / "config.pbtxt")
        shutil.copy(HERE / "baselines" / MODEL_PY_FROM.get(name, name) / "model.py", target / "1" / "model.py")
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
    """Rounds of (ours, baseline) at concurrency 4: medians of items/s and server compute ms per item, and the
    per-round ratios (``ratio_rounds``: items/s; ``compute_ratio_rounds``: server ms per item)."""
    runs: dict[str, list[tuple[bench.LoadResult, bench.StepStats]]] = {role: [] for role in models}
    for _ in range(plan.rounds):
        for role, model in models.items():
            result, steps = served(server, plan, model, payloads)
            runs[role].append((result, steps[0]))
    figures: dict[str, Any] = {}
    for role, items in runs.items():
        figures[role] = {
            "items_per_s": statistics.median(r.items_per_s for r, _ in items),
            "items_per_s_rounds": [round(r.items_per_s, 2) for r, _ in items],
            "item_ms_rounds": [round(s.item_ms, 4) for _, s in items],
            "compute_ms": statistics.median(s.compute_ms for _, s in items),
            "item_ms": statistics.median(s.item_ms for _, s in items),
            "p50_ms": statistics.median(r.p50_ms for r, _ in items),
            "errors": sum(r.errors for r, _ in items),
            "first_error": next((r.first_error for r, _ in items if r.first_error), ""),
        }
    # What clients get (items/s at concurrency 4) and what one item costs the step (server ms), round by round.
    figures["ratio_rounds"] = ratios([r.items_per_s for r, _ in runs["ours"]], [r.items_per_s for r, _ in runs["baseline"]])
    figures["compute_ratio_rounds"] = ratios([s.item_ms for _, s in runs["baseline"]], [s.item_ms for _, s in runs["ours"]])
    figures["ratio"] = statistics.median(figures["ratio_rounds"])
    figures["compute_ratio"] = statistics.median(figures["compute_ratio_rounds"])
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
    """Ours (resized with torch) vs the published example per size, our default Pillow step, the floor any Python image
    step pays (no decoding), the floor any JPEG-decoding step pays (that plus the entropy decoding) and the floor of a
    step decoding at the scale ours does (draft floor), in the same rounds."""
    models = {"ours": f"{IMAGE}_preprocess", "baseline": "example_image_preprocess", "ours_pillow": f"{PILLOW}_preprocess",
              "floor": "python_image_floor", "decode_floor": "python_image_decode_floor", "draft_floor": "python_image_draft_floor"}

    def run() -> dict[str, Any]:
        figures = {}
        for size in plan.sizes:
            log(f"image preprocessing {size}: ours vs the published example, and the Python image-step floors")
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
        ours_rounds = [a + b for a, b in zip(rounds["ours_tokenize"], rounds["ours_to_arrays"], strict=True)]
        base_rounds = [a + b for a, b in zip(rounds["baseline_tokenize_pad_512"], rounds["baseline_to_int64"], strict=True)]
        row["ratio_rounds"] = ratios(base_rounds, ours_rounds)
        row["ratio"] = statistics.median(row["ratio_rounds"])
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
            result, stats = served(server, plan, IMAGE, payloads, concurrency=concurrency, steps=steps)
            slowest = bench.slowest_step(stats[1:])
            levels.append({**result.to_json(), "steps": [s.to_json() for s in stats], "slowest_step": slowest.model if slowest else None})
        log("tuned vs the previous default build, concurrency 4")
        rounds: dict[str, list[float]] = {"tuned": [], "default": []}
        profile: dict[str, Any] = {}
        for _ in range(plan.rounds):
            for role, name, members in (("tuned", IMAGE, steps), ("default", DEFAULT, default_steps)):
                result, stats = served(server, plan, name, payloads, steps=members)
                rounds[role].append(result.items_per_s)
                profile[role] = [s.to_json() for s in stats]
        tuned, default = statistics.median(rounds["tuned"]), statistics.median(rounds["default"])
        per_round = ratios(rounds["tuned"], rounds["default"])
        return {"levels": levels, "tuned_vs_default": {"tuned_items_per_s": tuned, "default_items_per_s": default, "ratio": statistics.median(per_round),
                                                       "ratio_rounds": per_round, "profile": profile}}

    return with_models(server, [IMAGE, DEFAULT], run)


SERVED_CONCURRENCY = 4  # serving efficiency's load: the served closed loop keeps this many requests in flight


def efficiency_phase(server: Any, repo: Path, plan: Plan) -> dict[str, Any]:
    """Served at concurrency 4 against the in-process ceiling, in the same rounds (served, ceiling, served, ...).

    The ceiling's best (streams, threads, batch) is searched once first, while the server idles: the best with
    at most 4 images in flight (streams x batch, the served load's own bound: a closed loop of 4 never holds
    more) judges the target; the best of the whole grid is measured beside it in each round, with no verdict.
    Each round measures them back to back, so a change in the machine's load moves all of them."""
    payloads = image_payloads("500x375", plan.images_per_size)
    steps = [f"{IMAGE}_preprocess", f"{IMAGE}_model", f"{IMAGE}_postprocess"]

    def run() -> dict[str, Any]:
        grid = ceiling(repo, plan)
        bounded, best = grid["best_in_flight"], grid["best"]
        served_rounds: list[float] = []
        ceiling_rounds: list[float] = []
        unbounded_rounds: list[float] = []
        generators = set()
        for index in range(plan.rounds):
            log(f"serving efficiency, round {index + 1}/{plan.rounds}: served ({plan.generator.kind}) then the ceilings")
            result, _ = served(server, plan, IMAGE, payloads, concurrency=SERVED_CONCURRENCY, steps=steps)
            served_rounds.append(result.items_per_s)
            generators.add(result.load_generator)
            ceiling_rounds.append(ceiling_rate(repo, plan, bounded["streams"], bounded["threads"], bounded["batch"]))
            unbounded_rounds.append(ceiling_rounds[-1] if best == bounded else ceiling_rate(repo, plan, best["streams"], best["threads"], best["batch"]))
        return {"ceiling": grid, "served_rounds": served_rounds, "ceiling_rounds": ceiling_rounds,
                "unbounded_ceiling_rounds": unbounded_rounds,
                "rounds": ratios(served_rounds, ceiling_rounds),
                "unbounded_rounds": ratios(served_rounds, unbounded_rounds),
                # perf_analyzer only when it measured every round (a failed round fell back to the Python client)
                "load_generator": "perf_analyzer" if generators == {"perf_analyzer"} else "python",
                "note": plan.generator.note or ("; ".join(FALLBACKS) if generators != {"perf_analyzer"} else "")}

    return with_models(server, [IMAGE], run)


def ceiling(repo: Path, plan: Plan) -> dict[str, Any]:
    """The same preprocessing and ONNX in this process: the best (streams, threads, batch) of the grid, and the
    best with at most the served concurrency's images in flight."""
    grid = []
    for streams, threads, batch in plan.ceiling_grid:
        rate = ceiling_rate(repo, plan, streams, threads, batch)
        grid.append({"streams": streams, "threads": threads, "batch": batch, "in_flight": streams * batch, "items_per_s": round(rate, 2)})
        log(f"ceiling: {streams} stream(s) x {threads} thread(s), batch {batch}: {rate:.1f} items/s")
    return {"best": best_within(grid, None), "best_in_flight": best_within(grid, SERVED_CONCURRENCY),
            "in_flight_bound": SERVED_CONCURRENCY, "grid": grid}


def best_within(grid: Sequence[dict[str, Any]], in_flight: int | None) -> dict[str, Any]:
    """The fastest grid entry with at most ``in_flight`` images in flight (any, when None or none is that small)."""
    bounded = [g for g in grid if in_flight is None or g["streams"] * g["batch"] <= in_flight]
    return max(bounded or grid, key=lambda g: g["items_per_s"])


def ceiling_rate(repo: Path, plan: Plan, streams: int, threads: int, batch: int) -> float:
    """Items/s of the generated preprocessing + the ONNX model in this process, at one (streams, threads, batch)."""
    import onnxruntime as ort  # heavy; only the ceiling needs it in this process

    module = load_step(repo / f"{IMAGE}_preprocess" / "1" / "model.py", "ceiling_preprocess")
    step = module.TritonPythonModel()
    step.initialize({})
    images = photos("500x375", plan.images_per_size, seed=11)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        session = ort.InferenceSession(str(repo / f"{IMAGE}_model" / "1" / "model.onnx"), sess_options=options, providers=["CPUExecutionProvider"])
        return _in_process_rate(step, module, session, images, streams, batch, plan)
    finally:
        step.finalize()


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

    return image_accuracy(repo / f"{IMAGE}_preprocess" / "1" / "model.py", ResNet50_Weights.IMAGENET1K_V2.transforms(), count=plan.accuracy_count, sizes=tuple(SIZES),
                          smaller_draft=LARGE)


def above_floor(text: dict[str, Any]) -> float:
    """The text ratio once both sides stop paying the Python backend's per-execution floor (the echo step)."""
    floor = text["floor"]["item_ms"]
    ours, base = text["ours"]["item_ms"] - floor, text["baseline"]["item_ms"] - floor
    return base / ours if ours > 0 else 0.0


def image_bound(size: dict[str, Any], role: str = "floor") -> float:
    """The most any Python image step could serve against the baseline: the floor's items/s over the baseline's
    (``decode_floor``: any step that decodes the JPEG)."""
    floor = size.get(role)
    return floor["items_per_s"] / size["baseline"]["items_per_s"] if floor and size["baseline"]["items_per_s"] else 0.0


def text_bound(text: dict[str, Any]) -> float:
    floor = text["floor"]["item_ms"]
    return text["baseline"]["item_ms"] / floor if floor else 0.0


# Issue 23's targets, and which phase measured each figure (its load is that phase's).
TARGETS = {
    "image_preprocess_ratio": 2.0, "image_preprocess_ratio_large": 5.0, "text_preprocess_ratio": 5.0, "serving_efficiency": 0.9,
    "tuned_vs_default": 1.5, "tune_vs_model_analyzer": 1.0, "dali_mean_abs_diff": 0.02, "dali_max_abs_diff": 0.25,
}
LARGE = ("1920x1080", "4032x3024")


def run_external(name: str, **kwargs: Any) -> tuple[dict[str, Any] | None, str]:
    """``scripts/bench/<name>.py``'s ``measure(**kwargs)``: its result, or None and why not (one line)."""
    if not (HERE / f"{name}.py").is_file():
        return None, f"scripts/bench/{name}.py is not in this tree, so this figure was not measured"
    try:
        module = __import__(name)
        log(f"{name}.measure({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})")
        result = module.measure(**kwargs)
    except Exception as exc:  # another script's failure is this figure's note, not the benchmark's end
        return None, f"scripts/bench/{name}.py: measure failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    if not isinstance(result, dict):
        return None, f"scripts/bench/{name}.py: measure returned {type(result).__name__}, not a dict"
    return result, ""


def external_figure(result: dict[str, Any] | None, why: str, keys: Sequence[str], target: float, *, higher_is_better: bool = True,
                    min_rounds: int = 2, **extra: Any) -> dict[str, Any]:
    """A figure another script measured: the first of ``keys`` it returned, as a figure dict, a list of rounds or a number."""
    if result is None:
        return not_measured(target, why, higher_is_better=higher_is_better, **extra)
    key = next((k for k in keys if result.get(k) is not None), None)
    found = result.get(key) if key else None
    if isinstance(found, dict):
        found = found.get("rounds") or ([found["value"]] if found.get("value") is not None else None)
    if isinstance(found, (int, float)):
        found = [found]
    if not found:
        return not_measured(target, f"its result has none of {', '.join(keys)} (keys: {', '.join(result)})", higher_is_better=higher_is_better, **extra)
    return figure(found, target, higher_is_better=higher_is_better, min_rounds=min_rounds, source=key, **extra)


def run_tune(repo: Path, plan: Plan) -> dict[str, Any]:
    """``repo-builder tune`` on the text pipeline with a time budget (--dry-run: the repository stays as built)."""
    record = plan.work / "tune.json"
    record.unlink(missing_ok=True)
    command = [sys.executable, "-m", "repo_builder", "tune", str(repo), "--model", TEXT, "--max-seconds", f"{plan.tune_seconds:g}",
               "--dry-run", "--json", str(record), "-q"]
    if plan.generator.kind == "perf_analyzer" and plan.generator.binary is not None:  # the benchmark's own yardstick
        command += ["--load-generator", "perf_analyzer", "--perf-analyzer", str(plan.generator.binary)]
    else:
        command += ["--load-generator", "python"]
    if plan.quick:  # short windows, few candidates: checks that it runs
        command += ["--seconds", "1", "--warmup", "0.3", "--max-candidates", "3", "--confirm-rounds", "0"]
    log(f"repo-builder tune {TEXT}, budget {plan.tune_seconds:g} s")
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=plan.tune_seconds * 4 + 300)
    seconds = time.monotonic() - began
    doc = json.loads(record.read_text()) if record.is_file() else {}
    best = next((c for c in doc.get("candidates", []) if c.get("id") == doc.get("winner")), None)
    return {"exit_code": done.returncode, "seconds": round(seconds, 1), "budget_seconds": plan.tune_seconds, "candidates": len(doc.get("candidates", [])),
            "best_items_per_s": best and best.get("items_per_s"), "best_p99_ms": best and best.get("p99_ms"),
            "stderr_tail": " ".join(done.stderr.split())[-300:] if done.returncode else ""}


def model_analyzer_reason(generator: LoadGenerator) -> str:
    """Why Model Analyzer is not run here: it measures through perf_analyzer (scripts/bench/model_analyzer.py runs it)."""
    if generator.kind == "perf_analyzer":
        return "not run by this script: scripts/bench/model_analyzer.py runs Model Analyzer beside tune (its own venv, numpy 2)"
    why = generator.note.removesuffix("; measured with the Python gRPC client instead")
    return f"Model Analyzer measures through perf_analyzer, which is not usable here ({why}); scripts/bench/model_analyzer.py reproduces it"


def model_analyzer_figures(result: dict[str, Any] | None, why: str, load: dict[str, Any] | None) -> dict[str, Any]:
    """tune_vs_model_analyzer, tune_seconds and model_analyzer_seconds from scripts/bench/model_analyzer.py's result
    (its --json file, or its measure() when --model-analyzer is passed); {} when there is none (the keys stay as
    figures_from sets them). tune_seconds is judged against Model Analyzer's wall time (tune must not take longer)."""
    if result is None and not why:
        return {}
    if result is None or result.get("skipped") or result.get("model_analyzer_seconds") is None:
        reason = why or (result or {}).get("skipped") or "scripts/bench/model_analyzer.py measured nothing"
        ratio = (result or {}).get("tune_vs_model_analyzer") or not_measured(TARGETS["tune_vs_model_analyzer"], reason)
        return {"tune_vs_model_analyzer": ratio, "model_analyzer_seconds": not_measured(None, reason)}
    ma_seconds, tune_seconds = result["model_analyzer_seconds"], result.get("tune_seconds")
    source = f"scripts/bench/model_analyzer.py on {result.get('repository')}, p99 budget {result.get('p99_ms')} ms"
    return {
        "tune_vs_model_analyzer": {**result["tune_vs_model_analyzer"], "source": source, **({"phase_load": load} if load else {})},
        # No target of its own (it is tune_seconds' target), so rounds.py gives it no verdict.
        "model_analyzer_seconds": figure([ma_seconds], None, higher_is_better=False, min_rounds=1, note=f"{source}; tune_seconds' target",
                                         detail={k: result["model_analyzer"].get(k) for k in ("exit_code", "configurations", "best", "load")}),
        **({"tune_seconds": figure([tune_seconds], ma_seconds, higher_is_better=False, min_rounds=1,
                                   note=f"{source}: tune's whole wall time against Model Analyzer's ({ma_seconds:g} s) as target",
                                   detail=result.get("tune"))} if tune_seconds is not None else {}),
    }


def load_model_analyzer(path: Path) -> tuple[dict[str, Any] | None, str]:
    """A result file of scripts/bench/model_analyzer.py (--json), or None and why not (one line)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"--model-analyzer-json {path}: unreadable ({exc})"
    if not isinstance(doc, dict) or "tune_vs_model_analyzer" not in doc:
        return None, f"--model-analyzer-json {path}: not a result of scripts/bench/model_analyzer.py (no tune_vs_model_analyzer)"
    return doc, ""


def text_only(repo: Path, dest: Path) -> Path:
    """The text pipeline alone (Model Analyzer profiles a whole repository's worth of models otherwise)."""
    if not dest.is_dir():
        dest.mkdir(parents=True)
        for model in (TEXT, *(p.name for p in repo.glob(f"{TEXT}_*"))):
            shutil.copytree(repo / model, dest / model, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def serving_figure(efficiency: dict[str, Any], load: dict[str, Any]) -> dict[str, Any]:
    """Served / ceiling per round. The 0.9 target is perf_analyzer's: the Python client's figure has no verdict."""
    generator, note = efficiency["load_generator"], efficiency["note"]
    out = figure(efficiency["rounds"], TARGETS["serving_efficiency"], load=load, load_generator=generator, fallback_note=note)
    if generator != "perf_analyzer":
        out["python_client_status"] = out["status"]
        out["status"] = "not-measured"
        out["note"] = ("measured with the Python gRPC client on the same cores as the server, not perf_analyzer: the target is "
                       "judged with perf_analyzer only. " + out["note"]).strip()
    return out


def figures_from(results: dict[str, Any], plan: Plan) -> dict[str, Any]:
    """Issue 23's JSON keys, every one in rounds.py's figure shape, with the load of the phase that measured it."""
    image, text, load = results["image_preprocess"], results["text_preprocess"], results["machine"]["load_by_phase"]
    large_sizes = [s for s in LARGE if s in image]
    large_rounds = [min(r) for r in zip(*(image[s]["ratio_rounds"] for s in large_sizes), strict=True)] if large_sizes else []
    tune = results["tune"]
    ma_reason = model_analyzer_reason(plan.generator)
    onnx, onnx_why = results["external"]["text_preprocess"]
    dali, dali_why = results["external"]["dali_preprocess"]
    ma_result, ma_why = results["external"].get("model_analyzer", (None, ""))
    python_step = figure(text["compute_ratio_rounds"], TARGETS["text_preprocess_ratio"], load=load["text_preprocess"],
                         note="the generated Python tokenizing step vs pad-to-512, server compute per text")
    return {
        "image_preprocess_ratio": figure(image["500x375"]["ratio_rounds"], TARGETS["image_preprocess_ratio"], load=load["image_preprocess"],
                                         note="items/s at concurrency 4, 500x375 JPEGs, ours / the published example"),
        "image_preprocess_ratio_large": (figure(large_rounds, TARGETS["image_preprocess_ratio_large"], load=load["image_preprocess"],
                                                note=f"per round, the worse of {' and '.join(large_sizes)}")
                                         if large_rounds else not_measured(TARGETS["image_preprocess_ratio_large"], "no large photo size in this run")),
        "text_preprocess_ratio": external_figure(onnx, onnx_why, ("text_preprocess_ratio", "ratio_rounds", "rounds", "ratio", "value"),
                                                 TARGETS["text_preprocess_ratio"], python_step=python_step, detail=onnx, load=load.get("text_onnx")),
        "serving_efficiency": serving_figure(results["serving_efficiency"], load["serving_efficiency"]),
        "serving_efficiency_unbounded": figure(results["serving_efficiency"]["unbounded_rounds"], None, load=load["serving_efficiency"],
                                               note="served at concurrency 4 / the best in-process configuration with any number of images in flight"),
        "tuned_vs_default": figure(results["end_to_end"]["tuned_vs_default"]["ratio_rounds"], TARGETS["tuned_vs_default"], load=load["end_to_end"]),
        "tune_vs_model_analyzer": not_measured(TARGETS["tune_vs_model_analyzer"], ma_reason),
        "tune_seconds": (figure([tune["seconds"]], None, higher_is_better=False, min_rounds=1, load=load["tune"], detail=tune,
                                note=f"repo-builder tune --dry-run on {TEXT}, budget {tune['budget_seconds']:g} s; no verdict without Model Analyzer's time")
                         if tune["exit_code"] == 0 else not_measured(None, f"repo-builder tune failed (exit {tune['exit_code']}): {tune['stderr_tail']}", detail=tune)),
        "model_analyzer_seconds": not_measured(None, ma_reason),
        **model_analyzer_figures(ma_result, ma_why, load.get("model_analyzer")),
        "dali_mean_abs_diff": external_figure(dali, dali_why, ("dali_mean_abs_diff", "mean_abs_diff", "mean_abs"), TARGETS["dali_mean_abs_diff"],
                                              higher_is_better=False, min_rounds=1, detail=dali),
        "dali_max_abs_diff": external_figure(dali, dali_why, ("dali_max_abs_diff", "max_abs_diff", "max_abs"), TARGETS["dali_max_abs_diff"],
                                             higher_is_better=False, min_rounds=1),
    }


def details_from(results: dict[str, Any]) -> dict[str, Any]:
    """Figures that explain the targets (no target of their own): plain numbers."""
    text = results["text_preprocess"]
    return {
        "image_preprocess_ratio_by_size": {size: round(f["ratio"], 3) for size, f in results["image_preprocess"].items()},
        "image_preprocess_compute_ratio_by_size": {size: round(f["compute_ratio"], 3) for size, f in results["image_preprocess"].items()},
        # The floor's items/s over the baseline's: the ratio no Python image step can pass, per size.
        "image_preprocess_ratio_bound_by_size": {size: round(image_bound(f), 3) for size, f in results["image_preprocess"].items()},
        # The same with the entropy decoding every JPEG decoder does: the ratio no JPEG-decoding Python step can pass.
        "image_preprocess_decode_bound_by_size": {size: round(image_bound(f, "decode_floor"), 3)
                                                  for size, f in results["image_preprocess"].items() if "decode_floor" in f},
        # The same decoding at the scale ours decodes: where one scale less breaks the accuracy limits (the accuracy
        # phase's smaller_draft figures), the ratio no Python JPEG step within those limits can pass.
        "image_preprocess_draft_bound_by_size": {size: round(image_bound(f, "draft_floor"), 3)
                                                 for size, f in results["image_preprocess"].items() if "draft_floor" in f},
        # The default step (--resize-with pillow) against the same example: what a build without the option serves.
        "image_preprocess_pillow_ratio_by_size": {size: round(image_bound(f, "ours_pillow"), 3)
                                                  for size, f in results["image_preprocess"].items() if "ours_pillow" in f},
        # Both text steps answer faster than one Python gRPC client on 2 cores can ask (items/s is the
        # client's ceiling, the same for both), so the Python step's ratio is the server's compute time per text.
        "text_preprocess_throughput_ratio": text["ratio"],
        "text_preprocess_ratio_above_floor": above_floor(text),
        # The most any Python step could reach against the baseline served: baseline time / the echo floor.
        "text_preprocess_ratio_bound": text_bound(text),
        # The tokenizing work alone, in process, one text per call (as the baseline is served).
        "text_preprocess_ratio_in_process": results["text_profile"]["batch_1"]["ratio"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Short windows, one round: checks that the benchmark runs.")
    parser.add_argument("--json", type=Path, default=None, help="Write every figure here.")
    parser.add_argument("--workdir", type=Path, default=None, help="Keep exports and the repository here (reused when present).")
    parser.add_argument("--no-report", action="store_true", help="Do not write BENCHMARKS.md (a full run does by default).")
    parser.add_argument("--load-generator", choices=("auto", "perf_analyzer", "python"), default="auto",
                        help="perf_analyzer when it runs here (auto), or the Python gRPC client.")
    parser.add_argument("--perf-analyzer", type=Path, default=None, help="The perf_analyzer binary (default: as repo-builder bench finds it).")
    parser.add_argument("--tune-seconds", type=float, default=None, help="repo-builder tune's budget (default 60, --quick 15).")
    parser.add_argument("--model-analyzer-json", type=Path, default=None,
                        help="tune_vs_model_analyzer, tune_seconds, model_analyzer_seconds from this result of scripts/bench/model_analyzer.py.")
    parser.add_argument("--model-analyzer", action="store_true",
                        help="Run scripts/bench/model_analyzer.py on the text pipeline (its venv and a perf_analyzer 2.51: --perf-analyzer).")
    args = parser.parse_args(argv)
    from repo_builder.triton import start_server

    cores = available_cores()
    generator = choose(args.load_generator, args.perf_analyzer)
    log(f"load generator: {generator.kind}" + (f" ({generator.note})" if generator.note else ""))
    plan = make_plan(args.quick, cores)
    started = time.perf_counter()
    load_before = machine_load()
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        repo = prepare_repository(work)
        plan = replace(plan, generator=generator, work=work, tune_seconds=args.tune_seconds or plan.tune_seconds)
        results: dict[str, Any] = {"external": {}}
        load: dict[str, dict[str, Any]] = {}  # per phase: the machine's load before and after (other jobs come and go)

        def phase(key: str, work: Callable[[], Any]) -> Any:
            before, began = machine_load(), time.perf_counter()
            value = work()
            load[key] = {"before": before["loadavg"], "after": machine_load()["loadavg"], "cores": before["cores"],
                         "seconds": round(time.perf_counter() - began, 1)}
            return value

        with start_server(repo, mode="explicit", startup_timeout=120.0) as server:
            results["image_preprocess"] = phase("image_preprocess", lambda: image_phase(server, plan))
            results["text_preprocess"] = phase("text_preprocess", lambda: text_phase(server, plan))
            results["end_to_end"] = phase("end_to_end", lambda: end_to_end_phase(server, plan))
            results["serving_efficiency"] = phase("serving_efficiency", lambda: efficiency_phase(server, repo, plan))
        results["ceiling"] = results["serving_efficiency"]["ceiling"]
        results["text_profile"] = phase("text_profile", lambda: text_profile(repo, plan))
        results["accuracy"] = phase("accuracy", lambda: accuracy(repo, plan))
        results["tune"] = phase("tune", lambda: run_tune(repo, plan))
        results["external"]["text_preprocess"] = phase("text_onnx", lambda: run_external("text_preprocess", quick=args.quick, rounds=plan.rounds, generator=plan.generator))
        results["external"]["dali_preprocess"] = phase("dali", lambda: run_external("dali_preprocess", quick=args.quick))
        if args.model_analyzer_json:
            results["external"]["model_analyzer"] = load_model_analyzer(args.model_analyzer_json)
        elif args.model_analyzer:
            results["external"]["model_analyzer"] = phase("model_analyzer", lambda: run_external(
                "model_analyzer", repository=text_only(repo, work / "text-only"), perf_analyzer=args.perf_analyzer, quick=args.quick,
                rounds=None if args.quick else 5))
    after = machine_load()
    results["machine"] = {
        "cores": cores,
        "tuning": tune_model_step(None, None).summary().split(" (")[0].removeprefix("model step: "),
        "load_average_before": load_before["loadavg"],
        "load_average_after": after["loadavg"],
        "load_by_phase": load,
        "quick": args.quick,
        "rounds": plan.rounds,
        "seconds": round(time.perf_counter() - started, 1),
        "load_generator": generator.kind,
        "load_generator_note": generator.note,
        "perf_analyzer_failures": FALLBACKS,
    }
    results["figures"] = figures_from(results, plan)
    results["details"] = details_from(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=float))
    print(json.dumps({key: {k: f[k] for k in ("value", "spread", "target", "status")} for key, f in results["figures"].items()}, indent=2))
    if not args.quick and not args.no_report:
        from report_pipeline import markdown

        write_section("pipeline", markdown(results, plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
