"""Offline validate's two targets (issue 22): start-up on an empty repository, and 1,000 models in one process
next to the parse floor.

1. ``repo-builder validate EMPTY`` (wall, process start to exit; refused with RB001, still the cheapest run),
   interleaved with ``python -c pass`` and ``python -c "import click"`` for the interpreter's own share.
   Target: median <= 0.12 s.
2. In one process, after every import: ``validate_location`` on the repository of ``validate_speed.py``
   (scan + rules, the forked config parser off) against the parse floor (read each ``config.pbtxt`` and parse
   it with protobuf ``text_format`` into Triton's ``ModelConfig``), interleaved rounds. Target: median ratio
   <= 1.4x. The JSON report's rendering is timed too, apart.

Bytecode is cached in a temporary folder, as in an installed package (this environment sets
PYTHONDONTWRITEBYTECODE=1). Writes the section ``validate-targets`` of BENCHMARKS.md.

Usage: ``.venv/bin/python scripts/bench/validate_targets.py [--models 1000] [--rounds 15] [--starts 21]``;
a quick check that it runs: ``--models 50 --rounds 2 --starts 2 --no-write``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _report import write_section  # noqa: E402
from validate_speed import generate  # noqa: E402

PYTHON = sys.executable
REPO_BUILDER = str(Path(sys.executable).parent / "repo-builder")
START_TARGET = 0.12
RATIO_TARGET = 1.4
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

# Runs in a fresh interpreter: every import first, then interleaved rounds of the floor and validate.
IN_PROCESS = r'''
import json, sys, time
from pathlib import Path
from google.protobuf import text_format
from repo_builder.validate import scan
from repo_builder.validate.engine import check_repository
from repo_builder.validate.location import cycle_collector_paused, validate_location
from repo_builder.validate.records import ValidateOptions
from repo_builder.validate.reporters import render_report
from tritonclient.grpc import model_config_pb2

scan.PARALLEL_MIN_CONFIGS = 10**9  # one process: no forked parser
root, rounds = Path(sys.argv[1]), int(sys.argv[2])
folders = sorted(p for p in root.iterdir() if p.is_dir())


def floor():
    for folder in folders:
        text = (folder / "config.pbtxt").read_text(encoding="utf-8")
        text_format.Parse(text, model_config_pb2.ModelConfig())


def validate():
    return validate_location(root, ValidateOptions())


floor(); report = validate()  # warm: page cache, lazily built tables
out = {"floor": [], "validate": [], "render": [], "scan": [], "rules": [], "models": len(report.models),
       "errors": report.exit_code()}
for _ in range(rounds):
    for name, fn in (("floor", floor), ("validate", validate)):
        start = time.perf_counter()
        result = fn()
        out[name].append(time.perf_counter() - start)
    start = time.perf_counter()
    render_report(result, "json")
    out["render"].append(time.perf_counter() - start)
    # validate's two parts apart (as validate_location runs them: the cycle collector paused)
    with cycle_collector_paused():
        start = time.perf_counter()
        repository = scan.scan_repository(root)
        out["scan"].append(time.perf_counter() - start)
        start = time.perf_counter()
        check_repository(repository, ValidateOptions())
        out["rules"].append(time.perf_counter() - start)

# Where validate's time goes beyond the floor: one run under cProfile, cumulative seconds of its parts.
import cProfile, pstats
profiler = cProfile.Profile()
profiler.enable()
validate()
profiler.disable()
stats = pstats.Stats(profiler).stats
total = max(ct for (_, _, _, ct, _) in stats.values())
PARTS = {
    "config parse (text_format)": ("text_format.py", "_ParseOrMerge"),
    "scan (all of it)": ("scan.py", "scan_repository"),
    "guarded config reads (one no-follow open in the model folder)": ("guarded_read.py", "read_entry_stat_at"),
    "rules (check_repository)": ("engine.py", "check_repository"),
    "python model checks (read + parse model.py)": ("model_files.py", "check_python_model"),
    "ensemble tensor analysis": ("ensemble_tensors.py", "analyze_tensors"),
    "backend resolution": ("resolve.py", "resolve_backend"),
}
out["profile"] = {"total": total}
for label, (file_part, func) in PARTS.items():
    out["profile"][label] = max(
        (ct for (f, _, name), (_, _, _, ct, _) in stats.items() if name == func and f.endswith(file_part)), default=0.0
    )
print(json.dumps(out))
'''


def timed(cmd: list[str], expect: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall, CPU of the process) seconds of one run, which must exit ``expect``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env or ENV, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != expect:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}, not {expect}:\n{done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):.3f} (IQR {q[0]:.3f}-{q[2]:.3f}, min {min(values):.3f}, max {max(values):.3f})"


VALIDATE_EMPTY = "`repo-builder validate EMPTY`"


WHEEL_EMPTY = "the same, installed from the wheel"


def install_wheel(tmp: Path) -> Path:
    """A scratch venv with this checkout's wheel installed (core dependencies only), as a user has it: no
    editable-install finder in every interpreter start, bytecode compiled at install. Returns its bin folder."""
    dist, venv = tmp / "dist", tmp / "venv"
    root = HERE.parents[1]
    subprocess.run([PYTHON, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(dist), str(root)], check=True,
                   env=ENV, capture_output=True)
    for leftover in ("build/lib", "build/bdist.linux-x86_64", "repo_builder.egg-info"):  # pip wheel's, in the checkout
        shutil.rmtree(root / leftover, ignore_errors=True)
    clean = {k: v for k, v in ENV.items() if k not in ("PYTHONPATH", "PYTHONPYCACHEPREFIX")}  # the venv's own copy
    subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True, env=clean)
    wheel = next(dist.glob("*.whl"))
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], check=True, env=clean,
                   capture_output=True)
    return venv / "bin"


def start_up(empty: Path, starts: int, wheel_bin: Path | None) -> tuple[dict[str, list[tuple[float, float]]], str]:
    commands: dict[str, tuple[list[str], int, dict[str, str] | None]] = {
        "`python -c pass`": ([PYTHON, "-c", "pass"], 0, None),
        '`python -c "import click"`': ([PYTHON, "-c", "import click"], 0, None),
        VALIDATE_EMPTY: ([REPO_BUILDER, "validate", str(empty)], 1, None),  # RB001: an empty folder is refused
    }
    if wheel_bin is not None:
        installed = {k: v for k, v in ENV.items() if k not in ("PYTHONPATH", "PYTHONPYCACHEPREFIX")}  # its own copy
        commands["`python -c pass`, the wheel's venv"] = ([str(wheel_bin / "python"), "-c", "pass"], 0, installed)
        commands[WHEEL_EMPTY] = ([str(wheel_bin / "repo-builder"), "validate", str(empty)], 1, installed)
    for cmd, expect, env in commands.values():
        timed(cmd, expect, env)  # bytecode cache and page cache
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in commands}
    for _ in range(starts):
        for name, (cmd, expect, env) in commands.items():
            times[name].append(timed(cmd, expect, env))
    rows = ["| process | wall (s): median (spread) | CPU (s): median (spread) |", "| --- | --- | --- |"]
    rows += [f"| {name} | {spread([w for w, _ in v])} | {spread([c for _, c in v])} |" for name, v in times.items()]
    return times, "\n".join(rows)


def in_process(repo: Path, rounds: int) -> dict[str, Any]:
    done = subprocess.run([PYTHON, "-c", IN_PROCESS, str(repo), str(rounds)], capture_output=True, text=True, env=ENV)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def beyond(data: dict[str, Any], models: int) -> str:
    """Where validate's time beyond the parse floor goes, per model, from its two parts timed apart."""
    floor, scan, rules = (statistics.median(data[k]) for k in ("floor", "scan", "rules"))
    per = 1000 / models  # seconds for the repository -> ms per model
    allowed = (RATIO_TARGET - 1) * floor * per
    return (
        "Beyond the floor, per model (the two parts of `validate_location` timed apart, medians):\n\n"
        "| part | ms per model |\n| --- | --- |\n"
        f"| parse floor itself | {floor * per:.3f} |\n"
        f"| scan beyond the parse (list the model and version folders with sizes; read each config through "
        f"the guarded reader) | {(scan - floor) * per:.3f} |\n"
        f"| rules (check_repository) | {rules * per:.3f} |\n"
        f"| allowed by the {RATIO_TARGET}x target | {allowed:.3f} |\n\n"
        "What the floor leaves out and validate cannot: listing two folders per model with every file's size "
        "(two `scandir` and a `stat` per file: the version rules, RB405's missing files and RB103's links need "
        "them), opening each model folder and its config without following links, and the rules: "
        "some 55 calls per model (ONNX, TensorRT and DALI families skipped when their gate rules the model "
        "out), which read and parse each `model.py` with `ast` (Python models), open each ONNX graph and "
        "compare its inputs and outputs (ONNX models), and build each ensemble's tensor graph. No single rule "
        "dominates: the cost is breadth, about 1.3 microseconds per rule call on average, facts shared "
        "through the model's memo included (issue 38 counted instructions under callgrind on 200 models of "
        "this mix: the rules are about three quarters of what validate adds to the floor, the scan beyond "
        "the parse a fifth, the syscalls of listing and guarded opens uncounted on top). With the one "
        "config parser (protobuf's text_format), 1.4x leaves 0.07 ms per model, of which listing two "
        "folders takes about a third. Issue 38 added a gate per config section (each rule declares the "
        "top-level `ModelConfig` fields it can find anything without; the engine reads the config's "
        "`ListFields()` once per model and plans the open rules once per distinct set): on this mix it "
        "skips 10 to 12 of the ~55 calls per model, and measured 6% off the rules (134 to 126 ms, 15 "
        "interleaved rounds in one process), since the skipped rules were the cheap ones that returned at "
        "once. A second pass (issue 38 item 8) removed work done twice: the scan records which entries are "
        "symlinks, so the ONNX rules trust a link-free listing instead of `lstat`-ing each part of a graph's "
        "path again (RB601: 54 to 44 microseconds per ONNX model); an ensemble's step list, member names, "
        "scheduling and data-flow verdicts are kept on its entry (each was rebuilt by every rule that asked, "
        "the step list 16 times per ensemble); the Python `auto_complete_config` memo is keyed by strings, "
        "not pathlib paths; the config-versus-graph comparison reads each tensor's dims once; the entries' "
        "facts use a cached property without the lock Python 3.10 and 3.11 take at each first access. "
        "Measured in CPU time (interleaved processes, this checkout against the last commit, 4 x 9 rounds): "
        "rules 112 to 96 ms, ratio 2.1x to 2.0x; the scan unchanged. So 1.4x stays out of reach, for "
        "reasons no single change removes: in CPU time the floor is 0.165 ms per model and 1.4x leaves "
        "0.066 ms on top, while the scan alone added 0.063 ms (two `scandir` and a `stat` per file, the "
        "guarded open of each config: an open per path component, `fstat`, `read`, `close`; then pathlib "
        "paths and the frozen records of each model, version and file) and the rules 0.096 ms: about 45 "
        "rule calls per model at some 0.4 microseconds each for the call alone (about 17 ms of the 96), "
        "then the work that must touch every model: backend resolution, the versions Triton loads, I/O "
        "fields read through protobuf's accessors (each 0.05 to 0.1 microseconds, dozens per model), the "
        "ONNX comparison (11 microseconds per graph), the `model.py` checks and the ensemble tensor graph "
        "(about 50 microseconds per two-step ensemble). Reaching 1.4x would take the rules and the scan "
        "together below what the scan took alone. A third pass (issue 38 item 8) changed the scan's design: "
        "in one process each model folder is opened once (`O_DIRECTORY|O_NOFOLLOW`, relative to a "
        "descriptor of the root), listed through that descriptor, and its config and version folders are "
        "opened relative to it (`read_entry_at`: the listing's type stands for the `lstat`, `O_NOFOLLOW` "
        "refuses a link swapped in since, `fstat` checks a regular file within the limit, one `read` of "
        "the size plus one byte); a folder holding any link, or any error, is scanned the path-based way, "
        "whose words the findings keep. That removed the root-to-file walk per config (three opens, an "
        "`lstat`, a second `read`), and listed names become paths without pathlib parsing them again; the "
        "engine keys its section plans on `ListFields()`'s descriptors. Measured against the last commit "
        "in CPU time (alternating processes, 5 rounds each, 3 pairs): the scan beyond the parse 57 to 42 "
        "ms, the ratio about 1.99x to 1.85x; the rules unchanged (the rule calls and the shared facts "
        "above remain). The rounds "
        "are warm, as a long-lived process (an editor, a watch loop) sees them: each ONNX graph's inputs and "
        "outputs are kept per process by path, size and modification time, so a first, cold run also parses "
        "400 graph headers (about 0.1 ms each); `model.py` texts are parsed once per distinct text in any run.\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--starts", type=int, default=21)
    parser.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md alone")
    parser.add_argument("--wheel", action="store_true", help="also time the CLI installed from a wheel in a scratch venv")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="validate-targets-"))
    ENV["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    try:
        repo, empty = tmp / "models", tmp / "empty"
        repo.mkdir()
        empty.mkdir()
        mix = generate(repo, args.models)
        times, start_table = start_up(empty, args.starts, install_wheel(tmp) if args.wheel else None)
        data = in_process(repo, args.rounds)
        start = statistics.median(w for w, _ in times[VALIDATE_EMPTY])
        start_cpu = statistics.median(c for _, c in times[VALIDATE_EMPTY])
        installed = (
            f" Installed from the wheel: {statistics.median(w for w, _ in times[WHEEL_EMPTY]):.3f} s wall, "
            f"{statistics.median(c for _, c in times[WHEEL_EMPTY]):.3f} s CPU."
            if WHEEL_EMPTY in times
            else ""
        )
        ratios = [v / f for v, f in zip(data["validate"], data["floor"], strict=True)]
        ratio = statistics.median(data["validate"]) / statistics.median(data["floor"])
        ok_start, ok_ratio = start <= START_TARGET, ratio <= RATIO_TARGET
        md = (
            "## validate targets: start-up and one process against the parse floor (issue 22)\n\n"
            f"`scripts/bench/validate_targets.py`; {os.cpu_count()} CPUs shared with other work (load average "
            f"at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}). Bytecode cached as in an installed "
            "package. Medians with their spread (interquartile range, min, max).\n\n"
            f"Start-up: {args.starts} interleaved rounds of each process.\n\n" + start_table + "\n\n"
            f"- `repo-builder validate` on an empty folder: **{start:.3f} s** wall median "
            f"({'meets' if ok_start else 'misses'} the target of <= {START_TARGET} s), {start_cpu:.3f} s CPU. On a "
            "shared machine the wall time includes waiting for a CPU (compare `python -c pass`); the CPU time is "
            "what a quiet machine's wall time comes close to. Of it, the interpreter and click take the first two "
            "rows; the rest is importing the validator (about half of that is creating its ~80 frozen dataclasses; subprocess and difflib are imported only when a run needs them) "
            "and a run of ~2 ms." + installed + "\n\n"
            f"One process: {args.models} models ({mix['python']} Python, {mix['onnx']} ONNX, {mix['ensemble']} "
            f"ensembles; `validate_speed.py`'s repository), every import done first, then {args.rounds} "
            "interleaved rounds of the floor (read every `config.pbtxt`, `text_format.Parse` into `ModelConfig`) "
            "and `validate_location` (scan + every rule, forked parser off).\n\n"
            "| in one process | seconds: median (spread) |\n| --- | --- |\n"
            f"| parse floor | {spread(data['floor'])} |\n"
            f"| `validate_location` | {spread(data['validate'])} |\n"
            f"| JSON report of it (apart) | {spread(data['render'])} |\n"
            f"| ratio per round | {spread(ratios)} |\n\n"
            f"- ratio of medians validate / floor: **{ratio:.2f}x** ({'meets' if ok_ratio else 'misses'} the "
            f"target of <= {RATIO_TARGET}x)\n\n"
            "Where one `validate_location` run spends its time (cProfile, cumulative; profiling slows Python code, "
            "read the shares):\n\n| part | seconds | share |\n| --- | --- | --- |\n"
            + "\n".join(
                f"| {label} | {secs:.3f} | {secs / data['profile']['total']:.0%} |"
                for label, secs in data["profile"].items()
                if label != "total"
            )
            + "\n\n" + beyond(data, args.models)
        )
        print(md)
        if not args.no_write:
            write_section("validate-targets", md)
        return 0 if ok_start and ok_ratio else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
