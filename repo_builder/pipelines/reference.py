"""The generic runner of a family's reference check and bench reference (``Family.reference``).

It finds the ensemble's family and checkpoint in the repository's manifest (``repo-builder.json``: build
records "family" and "model"), serves the repository on the embedded Triton, and hands the family a client
of the ensemble: the family compares what it returns with its framework's own inference on the same inputs.
Like ``validate --live`` and ``serve`` it RUNS the repository's code (model.py files).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo_builder import dtypes
from repo_builder.errors import UserError
from repo_builder.pipelines.family import Family, InProcess, ReferenceReport, ReferenceRun
from repo_builder.pipelines.registry import family
from repo_builder.pipelines.settings import step_names
from repo_builder.repository.manifest import MANIFEST_FILE, read_manifest
from repo_builder.triton.bench import ModelBench, bench_model, percentile
from repo_builder.triton.locate import locate_tritonserver
from repo_builder.triton.server import start_server
from repo_builder.triton.standin import StandIn, remove_stage, stage_repository
from repo_builder.triton_config import read_config_file
from repo_builder.triton_layout import CONFIG_FILE

Log = Callable[[str], None]


def _quiet(message: str) -> None:
    """No progress lines."""


@dataclass(frozen=True)
class BuiltEnsemble:
    """What the manifest says about one built ensemble."""

    name: str
    family: Family
    model: Path | None  # the checkpoint it was built from (None: built from an export, or not recorded)
    max_batch_size: int
    runtime: str = "python"
    settings: Mapping[str, Any] = field(default_factory=dict)  # its build settings (the family's options included)


def built_ensemble(repository: Path, ensemble: str | None = None) -> BuiltEnsemble:
    """The ensemble (the only one, or ``ensemble``) and its family, from the manifest build wrote."""
    models = read_manifest(repository).get("models", {})
    ensembles = {name: entry for name, entry in models.items() if isinstance(entry, dict) and entry.get("role") == "ensemble"}
    if not ensembles:
        raise UserError(f"{repository / MANIFEST_FILE}: no ensemble built by 'repo-builder build' is recorded")
    if ensemble is None:
        if len(ensembles) > 1:
            raise UserError(f"{repository}: several ensembles ({', '.join(sorted(ensembles))}); pass --model NAME")
        ensemble = next(iter(ensembles))
    entry = ensembles.get(ensemble)
    if entry is None:
        raise UserError(f"{repository / MANIFEST_FILE}: no ensemble '{ensemble}' recorded; built ones: {', '.join(sorted(ensembles))}")
    versions = entry.get("versions", {})
    if not versions:
        raise UserError(f"{repository / MANIFEST_FILE}: ensemble '{ensemble}' has no version on disk")
    settings = versions[max(versions, key=int)].get("settings", {})
    command = settings.get("family")
    if not isinstance(command, str):
        raise UserError(f"{repository / MANIFEST_FILE}: '{ensemble}' records no family; rebuild it with this repo-builder")
    model = settings.get("model")
    from_export = bool(settings.get("from_export"))
    return BuiltEnsemble(ensemble, family(command), Path(model) if isinstance(model, str) and not from_export else None,
                         served_batch(repository, ensemble, int(settings.get("max_batch_size", 1))),
                         str(settings.get("runtime", "python")), settings)


def served_batch(repository: Path, ensemble: str, recorded: int) -> int:
    """The most items one request may hold: the ensemble config's own max_batch_size when it is readable (a
    family may cap it below the build option, e.g. a detector export with a fixed batch axis), else ``recorded``."""
    config = read_config_file(repository / ensemble / CONFIG_FILE, repository).config
    if config is None or config.max_batch_size <= 0:
        return max(recorded, 1)
    return min(max(recorded, 1), config.max_batch_size)


@contextlib.contextmanager
def served_copy(repository: Path, built: BuiltEnsemble, tritonserver: str | None) -> Iterator[Path]:
    """The folder to serve: the embedded Triton has no ONNX Runtime backend, so an ``onnxruntime`` model step
    is served by the same stand-in ``validate --live`` uses, in a linked copy (the repository is not touched)."""
    names = step_names(built.name)
    stand_ins = [*dict.fromkeys([names["model"], *called_models(repository, built)])] if built.runtime == "onnxruntime" else []
    # --preprocess onnx: the tokenizer step is an ONNX Runtime model too, whatever the model step's runtime.
    pre_config = repository / names["preprocess"] / "config.pbtxt"
    if pre_config.is_file() and 'platform: "onnxruntime_onnx"' in pre_config.read_text(encoding="utf-8", errors="replace"):
        stand_ins.append(names["preprocess"])
    if not stand_ins or not locate_tritonserver(tritonserver).bundled:
        yield repository
        return
    staged = stage_repository(repository, [StandIn(name) for name in stand_ins])
    try:
        yield staged.path
    finally:
        remove_stage(staged)


def called_models(repository: Path, built: BuiltEnsemble) -> tuple[str, ...]:
    """Model steps of the same build that are no step of the ensemble (a Python step calls them by BLS, e.g. the
    text-recognizer's detector, classifier and recognizer): loading the ensemble does not load them."""
    config = read_config_file(repository / built.name / CONFIG_FILE, repository).config
    steps = {step.model_name for step in config.ensemble_scheduling.step} if config is not None else set()
    found = []
    for name, entry in sorted(read_manifest(repository).get("models", {}).items()):
        versions = entry.get("versions", {}) if isinstance(entry, dict) else {}
        if name in steps or entry.get("role") != "model" or not versions:
            continue
        if versions[max(versions, key=int)].get("settings", {}).get("name") == built.name:
            found.append(name)
    return tuple(found)


def _checkpoint(built: BuiltEnsemble, model: Path | None) -> Path:
    chosen = model or built.model
    if chosen is None:
        raise UserError(f"'{built.name}' was built from an export: pass --reference-model with the checkpoint it came from")
    if not chosen.exists():
        raise UserError(f"{chosen}: the checkpoint '{built.name}' was built from is gone; pass --reference-model PATH")
    return chosen


def check_reference(
    repository: Path,
    *,
    model: Path | None = None,
    ensemble: str | None = None,
    minimum_cases: int = 200,
    tritonserver: str | None = None,
    load_timeout: float = 300.0,
    log: Log = _quiet,
) -> ReferenceReport:
    """Serve ``repository`` on the embedded Triton and run its family's reference check against ``model``
    (default: the checkpoint the manifest records). Raises UserError when the family declares none."""
    built = built_ensemble(Path(repository), ensemble)
    reference = built.family.reference
    if reference is None:
        raise UserError(f"build {built.family.command} declares no reference check")
    checkpoint = _checkpoint(built, model)
    log(f"{built.name}: serving {repository} on the embedded Triton")
    with served_copy(Path(repository), built, tritonserver) as folder, \
            start_server(folder, mode="explicit", tritonserver=tritonserver) as server:
        for name in called_models(Path(repository), built):
            server.load(name, timeout=load_timeout)
        server.load(built.name, timeout=load_timeout)

        def infer(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
            return server.infer(built.name, inputs, timeout=300.0)

        log(f"{built.name}: comparing with {built.family.command}'s reference on {checkpoint}")
        return reference.check(ReferenceRun(checkpoint, infer, built.max_batch_size, minimum_cases, built.settings))


# --- bench: the family's framework in process, on the same items, beside the served figures ----------------

@dataclass(frozen=True)
class InProcessFigures:
    """The framework's own inference in this process: per-item latency (batch 1) and its best throughput."""

    threads: int
    p50_ms: float  # one item per call
    p99_ms: float
    items_per_s_by_batch: Mapping[int, float]

    @property
    def best_batch(self) -> int:
        return max(self.items_per_s_by_batch, key=lambda b: self.items_per_s_by_batch[b])

    @property
    def best_items_per_s(self) -> float:
        return self.items_per_s_by_batch[self.best_batch]

    def to_json(self) -> dict[str, Any]:
        return {"threads": self.threads, "p50_ms": round(self.p50_ms, 3), "p99_ms": round(self.p99_ms, 3),
                "items_per_s_by_batch": {str(b): round(v, 2) for b, v in self.items_per_s_by_batch.items()},
                "best_batch": self.best_batch, "best_items_per_s": round(self.best_items_per_s, 2)}


def measure_in_process(
    runner: InProcess, items: Sequence[Any], *, batch_sizes: Sequence[int] = (1, 8, 32), seconds: float = 3.0
) -> InProcessFigures:
    """Time ``runner`` on ``items``: batch 1 for latency percentiles, then each batch size for throughput."""
    runner.run(items[: max(batch_sizes)])  # warm-up: first calls allocate
    latencies: list[float] = []
    rates: dict[int, float] = {}
    for batch in batch_sizes:
        done, index, start = 0, 0, time.perf_counter()
        while time.perf_counter() - start < seconds or done == 0:
            chunk = [items[(index + i) % len(items)] for i in range(batch)]
            index += batch
            began = time.perf_counter()
            runner.run(chunk)
            if batch == 1:
                latencies.append((time.perf_counter() - began) * 1000.0)
            done += batch
        rates[batch] = done / (time.perf_counter() - start)
    median = statistics.median(latencies) if latencies else 0.0
    return InProcessFigures(runner.threads, median, percentile(latencies, 0.99), rates)


def reference_payloads(chosen: Family, items: Sequence[Any]) -> list[dict[str, tuple[Any, str]]]:
    """One served request per item (batch 1), as ``triton.bench.run_load`` sends them."""
    reference = chosen.reference
    if reference is None:
        raise UserError(f"build {chosen.command} declares no reference to bench against")
    payloads = []
    for item in items:
        request = reference.request([item])
        payloads.append({name: (array, "BYTES" if array.dtype.kind in "OSU" else _wire(array)) for name, array in request.items()})
    return payloads


def _wire(array: Any) -> str:
    return dtypes.from_numpy(array.dtype.name).wire


def default_threads() -> int:
    """The threads a fair in-process reference gets: every core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@dataclass(frozen=True)
class FamilyBench:
    """Served figures of one ensemble on its family's reference inputs, beside the framework in process."""

    family: str
    unit: str
    served: ModelBench
    in_process: InProcessFigures

    def ratios(self) -> dict[int, float]:
        """Served items/s at each concurrency over the in-process best (batch chosen in its favour)."""
        best = self.in_process.best_items_per_s
        return {result.concurrency: (result.items_per_s / best if best else 0.0) for result, _ in self.served.levels}

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "unit": self.unit, "in_process": self.in_process.to_json(),
                "served_over_in_process": {str(c): round(r, 3) for c, r in self.ratios().items()}}


def bench_with_reference(
    server: Any,
    repository: Path,
    ensemble: str,
    *,
    concurrencies: Sequence[int],
    seconds: float,
    warmup: float,
    model: Path | None = None,
    threads: int | None = None,
    items: int = 64,
    log: Log = _quiet,
) -> FamilyBench:
    """``bench`` of ``ensemble`` with its family's reference inputs (one item per request), then the
    family's framework in this process on the same items with ``threads`` threads (default: every core)."""
    built = built_ensemble(repository, ensemble)
    reference = built.family.reference
    if reference is None:
        raise UserError(f"--reference: build {built.family.command} declares no reference to bench against")
    checkpoint = _checkpoint(built, model)
    sample = list(reference.items(items))
    served = bench_model(server, ensemble, {}, concurrencies, seconds, warmup, log, payloads=reference_payloads(built.family, sample))
    threads = threads or default_threads()
    log(f"{ensemble}: {built.family.command}'s reference in process ({threads} threads), {seconds:g} s per batch size")
    runner = reference.load(checkpoint, threads)
    figures = measure_in_process(runner, sample, seconds=seconds)
    return FamilyBench(built.family.command, reference.unit, served, figures)


def format_family_bench(bench: FamilyBench) -> str:
    """The reference lines under bench's table."""
    ref, unit = bench.in_process, bench.unit
    rates = ", ".join(f"batch {b}: {v:.1f}" for b, v in ref.items_per_s_by_batch.items())
    lines = [f"  reference ({bench.family}'s framework in process, {ref.threads} threads): p50 {ref.p50_ms:.1f} ms, "
             f"p99 {ref.p99_ms:.1f} ms per {unit[:-1] if unit.endswith('s') else unit}; {unit}/s {rates}"]
    for result, _ in bench.served.levels:
        ratio = bench.ratios()[result.concurrency]
        lines.append(f"  served at concurrency {result.concurrency}: {result.items_per_s:.1f} {unit}/s, p50 {result.p50_ms:.1f} ms, "
                     f"p99 {result.p99_ms:.1f} ms = {ratio:.2f}x the in-process best (batch {ref.best_batch})")
    return "\n".join(lines)
