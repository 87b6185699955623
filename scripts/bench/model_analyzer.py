"""tune vs Model Analyzer, side by side on one repository, one time budget, one p99 budget (issue 23, item 5).

1. Model Analyzer (PyPI ``triton-model-analyzer``) runs as its users run it: ``model-analyzer profile`` with
   ``--triton-launch-mode=local`` against the embedded tritonserver (through a wrapper that sets the library
   path and the Python backend's stubs as repo-builder's launcher does), quick search, every step CPU-only,
   ``--latency-budget`` = the p99 budget, the search capped for a 2-core CPU machine (instances, concurrency,
   model batch size). It measures through perf_analyzer: PyPI's perf-analyzer needs glibc 2.38, so pass a
   2.51 one (``scripts/bench/perf_analyzer_251.py DIR`` makes it) with ``--perf-analyzer``. Model Analyzer
   lives in a venv of its own (``--ma-venv``): it pulls numpy 2, which the server's Python backend cannot use.
   It is given a copy of the repository without ``preferred_batch_size``: its quick search lowers
   ``max_batch_size`` to 1 but keeps the preferred sizes (2, 4, 8), calls every such configuration illegal
   ("Skipping illegal run configuration") and would then only ever measure the default configuration.
2. ``repo-builder tune`` (no --dry-run, on a copy) gets Model Analyzer's measured wall time as its whole budget:
   ``--max-seconds`` = that time minus tune's fixed cost (server start, confirmation rounds:
   ``--tune-overhead-seconds``), and the same ``--p99-ms``. Both wall times are recorded.
3. Same yardstick: Model Analyzer's best (highest throughput with p99 within the budget, from its results CSV)
   is rebuilt as a runnable repository from its output model repository, and both winners are re-measured by
   ``repo-builder bench --load-generator perf_analyzer`` in interleaved rounds (MA, tune, MA, tune, ...), each
   at the concurrency it chose. ``tune_vs_model_analyzer`` is the median of the per-round ratios (rounds.py).

The default p99 budget, 10 ms, is for the tiny-BERT text pipeline on 2 cores: its default configuration
answers one client in about 4 ms and four in about 7 ms, so 10 ms leaves room to batch without admitting a
queue. Inputs are synthesized (random) on both sides, which suits text; a ResNet50 pipeline takes encoded JPEG
bytes and would need real images passed to Model Analyzer's perf_analyzer (``--input-data``) and to bench
(``--input``), which this script does not do yet.

    .venv/bin/python scripts/bench/model_analyzer.py REPOSITORY --perf-analyzer PATH [--ma-venv DIR]
        [--p99-ms 10] [--rounds 3] [--quick] [--json PATH] [--workdir DIR]

``--quick`` (CI): a small Model Analyzer search, short windows, two rounds. Without Model Analyzer's venv or
a runnable perf_analyzer the result says so (``skipped``) and carries no figure.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from rounds import MISSED, figure, not_measured, ratios  # noqa: E402  (a script beside this one)

DEFAULT_P99_MS = 10.0
TARGET = 1.0  # tune's winner serves at least Model Analyzer's best
TUNE_OVERHEAD_SECONDS = 55.0  # tune's cost outside --max-seconds: server start + confirmation rounds (measured: 172.7 s for 120 s)
DEFAULT_VENV = Path("/work/wt/ma-venv")
RESULTS_CSV = Path("results") / "metrics-model-inference.csv"
VARIANT = re.compile(r"^(?P<model>.+)_config_(?:default|\d+)$")


@dataclass(frozen=True)
class Measured:
    """One row of Model Analyzer's results CSV: one configuration at one concurrency."""

    model: str
    variant: str  # the ensemble's variant, e.g. txt_config_3
    composing: tuple[str, ...]  # its steps' variants, e.g. txt_model_config_3
    batch: int
    concurrency: int
    items_per_s: float
    p99_ms: float
    instance_group: str
    max_batch_size: str


def parse_results_csv(text: str) -> list[Measured]:
    """Model Analyzer's ``metrics-model-inference.csv``: every measured (configuration, concurrency)."""
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        if not row.get("Model") or not row.get("Throughput (infer/sec)"):
            continue
        variant, _, members = row["Model Config Path"].partition(":")
        batch = int(row.get("Batch") or 1)
        rows.append(Measured(
            model=row["Model"], variant=variant.strip(), composing=tuple(m.strip() for m in members.split(",") if m.strip()),
            batch=batch, concurrency=int(row["Concurrency"]),
            items_per_s=float(row["Throughput (infer/sec)"]) * 1.0, p99_ms=float(row["p99 Latency (ms)"]),
            instance_group=row.get("Instance Group", ""), max_batch_size=row.get("Max Batch Size", ""),
        ))
    return rows


def best_within(rows: Sequence[Measured], p99_ms: float) -> Measured | None:
    """Model Analyzer's best at the budget: the highest throughput whose p99 is within ``p99_ms``."""
    fitting = [r for r in rows if r.p99_ms <= p99_ms]
    return max(fitting, key=lambda r: (r.items_per_s, -r.p99_ms)) if fitting else None


def original_name(variant: str) -> str:
    """``txt_model_config_3`` -> ``txt_model`` (Model Analyzer's variant folders)."""
    found = VARIANT.match(variant)
    if not found:
        raise ValueError(f"{variant!r} is not a Model Analyzer variant name (NAME_config_N or NAME_config_default)")
    return found["model"]


def without_preferred_batch_sizes(config: str) -> str:
    """A config.pbtxt without ``preferred_batch_size`` (the batcher then forms the largest batch it can)."""
    return re.sub(r"^\s*preferred_batch_size\s*:\s*(\[[^\]]*\]|\d+)\s*\n", "", config, flags=re.MULTILINE)


def analyzer_input(repository: Path, dest: Path) -> Path:
    """The copy Model Analyzer profiles (see the module docstring: its quick search and preferred sizes)."""
    shutil.copytree(repository, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for config in dest.glob("*/config.pbtxt"):
        config.write_text(without_preferred_batch_sizes(config.read_text(encoding="utf-8")), encoding="utf-8")
    return dest


def rebuild_best(original: Path, output_repository: Path, best: Measured, dest: Path) -> Path:
    """A runnable repository serving Model Analyzer's best: ``original`` with each model's config.pbtxt taken
    from its variant folder in Model Analyzer's output repository (the variant configs keep the original names)."""
    shutil.copytree(original, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for variant in (best.variant, *best.composing):
        name = original_name(variant)
        source = output_repository / variant / "config.pbtxt"
        if not source.is_file():
            raise FileNotFoundError(f"{source}: Model Analyzer's output repository lacks the variant it measured")
        text = source.read_text(encoding="utf-8")
        named = re.search(r'^name:\s*"([^"]*)"', text, flags=re.MULTILINE)
        if named is None or named[1] != name:
            text = re.sub(r'^name:\s*"[^"]*"', f'name: "{name}"', text, count=1, flags=re.MULTILINE)
        (dest / name / "config.pbtxt").write_text(text, encoding="utf-8")
    return dest


def comparison(tune_rounds: Sequence[float], ma_rounds: Sequence[float], *, min_rounds: int = 3,
               tune_p99_ms: Sequence[float] = (), p99_budget_ms: float | None = None, **extra: Any) -> dict[str, Any]:
    """``tune_vs_model_analyzer``: per-round tune / Model Analyzer throughput, judged against 1.0 by its spread. The
    ratio is "at the same budget" only while tune's winner keeps it: when its median p99 over the rounds breaks the
    budget, the figure is missed, whatever it serves (a rate bought with latency is not the one asked for)."""
    out = figure(ratios(tune_rounds, ma_rounds), TARGET, min_rounds=min_rounds,
                 note="per interleaved round: tune's winner items/s / Model Analyzer's best items/s, same load generator", **extra)
    if p99_budget_ms is not None and tune_p99_ms and statistics.median(tune_p99_ms) > p99_budget_ms and out["status"] != MISSED:
        out["status_by_throughput"] = out["status"]
        out["status"] = MISSED
        out["note"] += (f". tune's winner broke the {p99_budget_ms:g} ms p99 budget in these rounds (median "
                        f"{statistics.median(tune_p99_ms):.1f} ms): missed, whatever it serves")
    return out


def has_measurements(exit_code: int | None, rows: Sequence[Measured]) -> bool:
    """Model Analyzer measured when it exited 0 with rows in its CSV (its 'has no data' warnings are the
    GPU metrics a CPU-only run cannot have, not a failure)."""
    return exit_code == 0 and bool(rows)


def perf_analyzer_runs(binary: Path | None) -> str:
    """'' when ``binary`` runs here, else why not (one line)."""
    if binary is None or not binary.is_file():
        return f"no perf_analyzer at {binary} (scripts/bench/perf_analyzer_251.py DIR makes a 2.51 one)"
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False)
    except OSError as exc:
        return f"{binary}: {exc}"
    if "GLIBC" in done.stderr or (done.returncode != 0 and "perf_analyzer" not in (done.stdout + done.stderr).lower()):
        return f"{binary} does not run here: {' '.join(done.stderr.split())[:200]}"
    return ""


def server_wrapper(workdir: Path) -> Path:
    """tritonserver as repo-builder starts it (libraries, backends with this Python's stub)."""
    from repo_builder.triton.locate import locate_tritonserver, prepare_backends, server_environment

    install = locate_tritonserver()
    env = server_environment(install, {})
    backends = prepare_backends(install, workdir / "backends")
    wrapper = workdir / "tritonserver"
    wrapper.write_text(
        "#!/usr/bin/env bash\n"
        f"export LD_LIBRARY_PATH='{env.get('LD_LIBRARY_PATH', '')}'\n"
        f"export PATH='{env['PATH']}':\"$PATH\"\n"
        f"exec '{install.binary}' --backend-directory '{backends}' \"$@\"\n",
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return wrapper


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_model_analyzer(repository: Path, ensemble: str, steps: Sequence[str], venv: Path, workdir: Path, perf_analyzer: Path,
                       p99_ms: float, quick: bool) -> dict[str, Any]:
    ma_input = analyzer_input(repository, workdir / "ma-input")
    # CPU-sized search: 2 cores gain nothing from 5 instances per step or 1024 clients.
    caps = (2, 8, 8) if quick else (4, 64, 32)
    cmd = [
        str(venv / "bin" / "model-analyzer"), "profile",
        "--model-repository", str(ma_input), "--profile-models", ensemble,
        "--triton-launch-mode=local", "--triton-server-path", str(server_wrapper(workdir)),
        "--output-model-repository-path", str(workdir / "ma-out"), "--override-output-model-repository",
        "--checkpoint-directory", str(workdir / "ma-checkpoints"), "--export-path", str(workdir / "ma-results"),
        "--run-config-search-mode", "quick", "--cpu-only-composing-models", ",".join(steps),
        "--latency-budget", f"{p99_ms:g}", "--perf-analyzer-path", str(perf_analyzer),
        "--run-config-search-max-instance-count", str(caps[0]), "--run-config-search-max-concurrency", str(caps[1]),
        "--run-config-search-max-model-batch-size", str(caps[2]),
    ]
    (workdir / "ma-results").mkdir(exist_ok=True)
    # Model Analyzer leaves its local server's log as a temporary file: keep it in the workdir, not the caller's TMPDIR.
    (workdir / "ma-tmp").mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(workdir / "ma-tmp")}
    before = loadavg()
    began = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False, env=env)
        output = done.stdout + done.stderr
        code: int | None = done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = f"{exc.stdout!r}{exc.stderr!r}", None
    seconds = time.monotonic() - began
    (workdir / "model-analyzer.log").write_text(output, encoding="utf-8")
    results = workdir / "ma-results" / RESULTS_CSV
    rows = parse_results_csv(results.read_text(encoding="utf-8")) if results.is_file() else []
    best = best_within(rows, p99_ms)
    problems = [line for line in output.splitlines() if re.search(r"error|failed|illegal|traceback", line, flags=re.IGNORECASE)]
    return {
        "command": " ".join(cmd), "exit_code": code, "seconds": round(seconds, 1), "measured": has_measurements(code, rows),
        "load": {"before": before, "after": loadavg()},
        "problems": sorted(set(problems))[:12], "perf_analyzer": str(perf_analyzer),
        "configurations": sorted({r.variant for r in rows}), "measurements": [r.__dict__ | {"composing": list(r.composing)} for r in rows],
        "best": best and (best.__dict__ | {"composing": list(best.composing)}),
        "_best": best,
    }


def run_tune(repository: Path, ensemble: str, budget: float, p99_ms: float, concurrency: int, workdir: Path, quick: bool,
             perf_analyzer: Path) -> dict[str, Any]:
    """tune with Model Analyzer's wall time as its budget, measuring with the same perf_analyzer (one yardstick)."""
    copy = workdir / "tune-repository"
    shutil.copytree(repository, copy, ignore=shutil.ignore_patterns("__pycache__"))
    record = workdir / "tune.json"
    cmd = [str(ROOT / ".venv" / "bin" / "repo-builder"), "tune", str(copy), "--model", ensemble, "--max-seconds", f"{budget:.0f}",
           "--p99-ms", f"{p99_ms:g}", "--concurrency", str(concurrency), "--json", str(record), "-q",
           "--load-generator", "perf_analyzer", "--perf-analyzer", str(perf_analyzer)]
    if quick:
        cmd += ["--seconds", "2", "--warmup", "0.5", "--confirm-rounds", "1"]
    before = loadavg()
    began = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=budget * 4 + 600)
    seconds = time.monotonic() - began
    doc = json.loads(record.read_text()) if record.exists() else {}
    best = next((c for c in doc.get("candidates", []) if c["id"] == doc.get("winner")), None)
    point = doc.get("operating_point") or {}  # the load tune found its winner takes within the budget (as MA's best)
    return {"command": " ".join(cmd), "exit_code": done.returncode, "seconds": round(seconds, 1), "max_seconds": round(budget),
            "load": {"before": before, "after": loadavg()}, "concurrency": int(point.get("concurrency", concurrency)),
            "operating_point": point or None,
            "best_items_per_s": best and best["items_per_s"], "best_p99_ms": best and best["p99_ms"],
            "winner": best, "candidates": len(doc.get("candidates", [])), "stderr_tail": done.stderr[-600:], "repository": str(copy),
            "load_generator": doc.get("settings", {}).get("load_generator")}


def bench_once(repository: Path, ensemble: str, concurrency: int, perf_analyzer: Path, seconds: float, warmup: float, out: Path) -> dict[str, Any]:
    """One measurement through ``repo-builder bench`` with perf_analyzer: items/s and p99 (or the error)."""
    cmd = [str(ROOT / ".venv" / "bin" / "repo-builder"), "bench", str(repository), "--model", ensemble, "--concurrency", str(concurrency),
           "--seconds", f"{seconds:g}", "--warmup", f"{warmup:g}", "--load-generator", "perf_analyzer",
           "--perf-analyzer", str(perf_analyzer), "--format", "json", "--output", str(out), "-q"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=seconds * 10 + 300)
    if not out.is_file():
        return {"error": f"exit {done.returncode}: {' '.join(done.stderr.split())[-300:]}"}
    level = json.loads(out.read_text())["models"][0]["levels"][0]
    return {"items_per_s": level["items_per_s"], "p99_ms": level["p99_ms"], "load_generator": level["load_generator"],
            "errors": level["errors"], "loadavg": loadavg()}


def interleaved(sides: dict[str, tuple[Path, int]], ensemble: str, perf_analyzer: Path, rounds: int, seconds: float, warmup: float,
                workdir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every side once per round, in turn (A, B, A, B, ...), so the machine's drift hits both alike."""
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for index in range(rounds):
        for name, (repository, concurrency) in sides.items():
            result = bench_once(repository, ensemble, concurrency, perf_analyzer, seconds, warmup, workdir / f"bench-{name}-{index}.json")
            print(f"round {index + 1} {name}: {result}", file=sys.stderr, flush=True)
            out[name].append(result)
    return out


def measure(repository: Path, *, perf_analyzer: Path | None = None, ma_venv: Path = DEFAULT_VENV, model: str | None = None,
            p99_ms: float = DEFAULT_P99_MS, rounds: int | None = None, quick: bool = False, workdir: Path | None = None,
            tune_overhead_seconds: float = TUNE_OVERHEAD_SECONDS) -> dict[str, Any]:
    """The whole comparison (scripts/bench/pipeline.py calls this); see the module docstring."""
    sys.path.insert(0, str(ROOT))
    from repo_builder.tune.flow import only_ensemble
    from repo_builder.tune.runner import tunable_steps

    repository = repository.resolve()
    ensemble = model or only_ensemble(repository)
    rounds = rounds or (2 if quick else 3)
    base = {"repository": str(repository), "ensemble": ensemble, "p99_ms": p99_ms, "quick": quick,
            "machine_glibc": os.confstr("CS_GNU_LIBC_VERSION"), "cores": os.cpu_count()}
    why = "" if (ma_venv / "bin" / "model-analyzer").is_file() else f"no Model Analyzer venv at {ma_venv} (pip install triton-model-analyzer into its own venv)"
    why = why or perf_analyzer_runs(perf_analyzer)
    if why:
        return {**base, "skipped": why, "tune_vs_model_analyzer": not_measured(TARGET, why), "tune_seconds": None, "model_analyzer_seconds": None}
    assert perf_analyzer is not None  # perf_analyzer_runs said it runs
    steps = list(tunable_steps(repository, ensemble))
    with tempfile.TemporaryDirectory(prefix="rb-ma-") as scratch:
        work = workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        analyzer = run_model_analyzer(repository, ensemble, steps, ma_venv, work, perf_analyzer.resolve(), p99_ms, quick)
        best: Measured | None = analyzer.pop("_best")
        result = {**base, "model_analyzer": analyzer, "model_analyzer_seconds": analyzer["seconds"]}
        if best is None:
            why = (f"Model Analyzer measured nothing within p99 {p99_ms:g} ms (exit {analyzer['exit_code']}, "
                   f"{len(analyzer['measurements'])} measurements; log: {work / 'model-analyzer.log'})")
            return {**result, "tune_vs_model_analyzer": not_measured(TARGET, why), "tune_seconds": None}
        budget = max(10.0, analyzer["seconds"] - tune_overhead_seconds)
        tuned = run_tune(repository, ensemble, budget, p99_ms, 2 if quick else 4, work, quick, perf_analyzer.resolve())
        result |= {"tune": tuned, "tune_seconds": tuned["seconds"], "tune_within_model_analyzer_time": tuned["seconds"] <= analyzer["seconds"]}
        if tuned["exit_code"] != 0:
            why = f"repo-builder tune exit {tuned['exit_code']}: {' '.join(tuned['stderr_tail'].split())[-300:]}"
            return {**result, "tune_vs_model_analyzer": not_measured(TARGET, why)}
        ma_repo = rebuild_best(repository, work / "ma-out", best, work / "ma-best")
        seconds, warmup = (3.0, 1.0) if quick else (10.0, 2.0)
        measured = interleaved({"model_analyzer": (ma_repo, best.concurrency), "tune": (Path(tuned["repository"]), tuned["concurrency"])},
                               ensemble, perf_analyzer.resolve(), rounds, seconds, warmup, work)
        failed = [r["error"] for side in measured.values() for r in side if "error" in r]
        if failed:
            return {**result, "rounds": measured, "tune_vs_model_analyzer": not_measured(TARGET, f"a bench round failed: {failed[0]}")}
        ma_rates = [r["items_per_s"] for r in measured["model_analyzer"]]
        tune_rates = [r["items_per_s"] for r in measured["tune"]]
        p99s = {side: [r["p99_ms"] for r in rs] for side, rs in measured.items()}
        return {**result, "rounds": measured, "bench_seconds": seconds, "tune_vs_model_analyzer": comparison(
            tune_rates, ma_rates, min_rounds=2 if quick else 3, load=[r["loadavg"] for side in measured.values() for r in side],
            tune_p99_ms=p99s["tune"], p99_budget_ms=p99_ms, model_analyzer_items_per_s=ma_rates, tune_items_per_s=tune_rates, p99_ms=p99s,
            # The verdict reads tune's median p99 over the rounds; this says whether every single round kept the budget too.
            p99_within_budget_every_round={side: all(v <= p99_ms for v in vs) for side, vs in p99s.items()},
            median_p99_ms={side: statistics.median(vs) for side, vs in p99s.items()},
            concurrency={"model_analyzer": best.concurrency, "tune": tuned["concurrency"]},
            median_items_per_s={"model_analyzer": statistics.median(ma_rates), "tune": statistics.median(tune_rates)})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repository", type=Path)
    parser.add_argument("--model", default=None, help="the ensemble (default: the only one)")
    parser.add_argument("--ma-venv", type=Path, default=DEFAULT_VENV, help=f"Model Analyzer's own venv [default: {DEFAULT_VENV}]")
    parser.add_argument("--perf-analyzer", type=Path, default=None,
                        help="perf_analyzer for Model Analyzer and bench (2.51 from scripts/bench/perf_analyzer_251.py; PyPI's needs glibc 2.38)")
    parser.add_argument("--p99-ms", type=float, default=DEFAULT_P99_MS, help=f"the p99 budget both search under [default: {DEFAULT_P99_MS:g}]")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved re-measurement rounds [default: 3, --quick 2]")
    parser.add_argument("--tune-overhead-seconds", type=float, default=TUNE_OVERHEAD_SECONDS,
                        help="subtracted from Model Analyzer's wall time to give tune's --max-seconds")
    parser.add_argument("--quick", action="store_true", help="small search, short windows (CI)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep Model Analyzer's and tune's files here")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = measure(args.repository, perf_analyzer=args.perf_analyzer, ma_venv=args.ma_venv, model=args.model, p99_ms=args.p99_ms,
                     rounds=args.rounds, quick=args.quick, workdir=args.workdir, tune_overhead_seconds=args.tune_overhead_seconds)
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
