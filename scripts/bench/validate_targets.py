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
out = {"floor": [], "validate": [], "floor_cpu": [], "validate_cpu": [], "render": [], "scan": [], "rules": [],
       "models": len(report.models), "errors": report.exit_code()}
for _ in range(rounds):
    for name, fn in (("floor", floor), ("validate", validate)):
        start, cpu = time.perf_counter(), time.process_time()
        result = fn()
        out[name].append(time.perf_counter() - start)
        out[name + "_cpu"].append(time.process_time() - cpu)
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
        "(a `scandir` of each and a `stat` per file: the version rules, RB405's missing files and RB103's links "
        "need them), opening each model folder and its config without following links, and the rules: the facts "
        "every model needs once (backend resolution, the versions Triton loads, the tensor and instance-group "
        "summaries), each `model.py` read (parsed with `ast` once per distinct text), each ONNX graph's inputs "
        "and outputs compared with the config, each ensemble's steps, members and tensors judged; then 1 to 4 "
        "rule calls and two family gates for a clean model of this mix (rules whose config sections are unset, "
        "or whose quiet flag says the model's facts leave them nothing to find, are left out without a call).\n\n"
        "How it got here (issue 38 item 8; each pass measured against the one before, CPU time, interleaved "
        "rounds): a gate per config section (rules declare the top-level fields they need; 6% off the rules); "
        "work done twice removed (the scan records links, ensemble facts kept per ensemble: 2.1x to 2.0x); the "
        "scan through descriptors (each model folder opened once without following a link, listed and read "
        "relative to it: 2.0x to 1.85x); then a fourth pass over every part, each change checked by a "
        "differential run of the JSON reports of about 2,800 repositories (every repository the validate "
        "tests build, Triton's conformance cases, this benchmark) against the commit before it, with no "
        "difference: the scan lists a model folder in one pass, takes the config's size and time from the "
        "`fstat` of its read, writes its records' fields directly instead of through the frozen dataclass's "
        "per-field `setattr`, and marks a folder with no link and only ASCII names (the link and name rules "
        "then have nothing to walk); it parses the configs a batch at a time (64 folders or 1 MiB) after "
        "listing them, so protobuf's parser runs back to back, warm, instead of between a dozen syscalls "
        "per model (the scan's cost beyond the parse fell by a third); one pass per model over its tensors, "
        "instance groups and listing (`io_summary`, `group_summary`, `listing_summary`) gives the flags "
        "(`QuietFlags`) on which the I/O, instance-group, label, link and name rules find nothing, with one more "
        "for a plainly laid out model (visible, parsed, every subfolder a canonically named version: eight "
        "layout, version and config rules) and one for an ONNX model whose graph fits its config (seven ONNX "
        "rules), and the engine's plan for a model leaves those 24 rules out without a call (tests/validate/"
        "test_section_gates.py compares the report with calling every rule); backend resolution runs as two straight-line paths (the "
        "config alone, or the first folder's files), checked equal to the old one on 207,936 combinations; "
        "the ensemble rules read each step and member tensor from protobuf once and build tensor nodes only "
        "for a mismatch; the ONNX rules keep each version's graph per model, compare types as numbers and "
        "decide the common exact-shape case early. Repeated protobuf fields are read as slices (a list), "
        "since iterating the field itself costs several times more. Before this pass the same run measured "
        "0.096 ms of rules and 0.049 ms of scan beyond the parse per model, and 1.87x; after it 0.043 ms and "
        "0.020 ms, and 1.41x, with no margin (runs of that code gave 1.39x to 1.45x). A fifth pass, checked "
        "the same way, gave the margin: quiet flags for the platform rules (RB401-RB404), the version and "
        "manifest rules (RB110, RB111, RB002), the Python environment rules without an image to judge in "
        "(RB421, RB422), the devices rule (RB306, sharing one function with the rule itself), the eleven "
        "ensemble rules of an ensemble whose stages all pass and the Python source rule (RB407) of a model "
        "that is not Python, so a clean model calls 1 to 4 rules instead of 15; protobuf's parser and the proto class looked up once, not imported per config; each entry's "
        "version numbers and path text written when the scan makes it (formatting a Path costs 1.5 "
        "microseconds the first time); and the tensor and instance-group summaries reading the rarely set "
        "fields (reshape, formats, labels, gpus, profiles) only when the config text writes their names, "
        "since the text format names every field it sets; ensembles ordered by the member names "
        "their rules keep. The table above has what the parts are now.\n\n"
        "Repeated runs of the same code on this shared 2-CPU machine land about 3% apart. The final code of "
        "the fifth pass gave 1.37x and 1.34x in two runs before the one above. The run recorded before its "
        "last two changes missed the target at 1.41x, a run under load (per-round ratios from 0.88x to "
        "1.68x, the floor up to 0.278 s); three other runs of that code gave 1.34x, 1.35x and 1.36x.\n\n"
        "Why the ratio is no lower: protobuf's text parser is the floor (about 0.14 ms of its 0.165 ms per "
        "model; the rest is reading the file), and 1.4x leaves about 0.066 ms per model for everything "
        "else. The scan's syscalls alone (two folder listings through descriptors, which `os.scandir` "
        "duplicates and rewinds, a `stat` per file, the config's no-follow open, `fstat`, `read`, `close`) "
        "take about 0.026 ms in a loop that does nothing else, and kernel time is about half of the scan "
        "beyond the parse. What remains in the rules is the facts every model needs once (backend resolution, "
        "the versions Triton loads, the tensor and group summaries: each read of a protobuf field costs 0.05 "
        "to 0.3 microseconds), the ONNX comparison, and the ensembles' steps, members and tensor views (about "
        "a quarter of the rules on this mix: reading a protobuf map costs more than a field). Closing "
        "the rest would take the rules fused into one pass per config, which would give up the one-function-"
        "per-rule design (docs/rules.md is generated from the rules themselves). The rounds are warm, as a "
        "long-lived process (an editor, a watch loop) sees them: each ONNX graph's inputs and outputs are "
        "kept per process by path, size and modification time, so a first, cold run also parses 400 graph "
        "headers (about 0.1 ms each); `model.py` texts are parsed once per distinct text in any run.\n"
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
        cpu_ratios = [v / f for v, f in zip(data["validate_cpu"], data["floor_cpu"], strict=True)]
        ratio = statistics.median(data["validate"]) / statistics.median(data["floor"])
        # On a shared machine one statistic can land under the target by a burst of load on the floor's
        # side: the target counts as met only when all three do (medians' ratio, per-round wall and CPU).
        judged = (ratio, statistics.median(ratios), statistics.median(cpu_ratios))
        ok_start, ok_ratio = start <= START_TARGET, max(judged) <= RATIO_TARGET
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
            f"| ratio per round | {spread(ratios)} |\n"
            f"| ratio per round, CPU time (`process_time`) | {spread(cpu_ratios)} |\n\n"
            f"- validate / floor: **{ratio:.2f}x** (ratio of medians), {judged[1]:.2f}x (median per round), "
            f"{judged[2]:.2f}x (median per round in CPU time): {'meets' if ok_ratio else 'misses'} the target of "
            f"<= {RATIO_TARGET}x (met only when all three are)\n\n"
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
