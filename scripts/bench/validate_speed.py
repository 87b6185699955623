"""How fast is ``repo-builder validate`` on a 1,000-model repository, next to the floor of merely parsing it?

Generates a repository (Python models, ONNX models with small files, ensembles over them), then times, as
subprocesses with interpreter start included and several runs each (medians):

- the floor: list the repository, read every ``config.pbtxt`` and parse it with Triton's proto;
- ``repo-builder validate`` on the same folder;
- the same in one process (the two-process config parse switched off), to show what the fork buys.

Target: validate within 2x the floor. A cProfile of one validate run shows where the time goes. The
result is written to BENCHMARKS.md (section ``validate``).

Usage: ``.venv/bin/python scripts/bench/validate_speed.py [--models 1000] [--runs 5]``; a quick check
that it runs: ``--models 50 --runs 1 --no-write``.
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from _report import write_section  # noqa: E402

PYTHON = sys.executable
REPO_BUILDER = str(Path(sys.executable).parent / "repo-builder")
TARGET_RATIO = 2.0

MODEL_PY = '''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 2)]))
        return out
'''
PY_CONFIG = '''name: "{name}"
backend: "python"
max_batch_size: 8
input [{{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}]
output [{{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }}]
dynamic_batching {{ }}
instance_group [{{ kind: KIND_CPU count: 1 }}]
'''
ONNX_CONFIG = '''name: "{name}"
backend: "onnxruntime"
max_batch_size: 8
input [{{ name: "x" data_type: TYPE_FP32 dims: [ 16 ] }}]
output [{{ name: "y" data_type: TYPE_FP32 dims: [ 16 ] }}]
instance_group [{{ kind: KIND_CPU }}]
'''
ENSEMBLE_CONFIG = '''name: "{name}"
platform: "ensemble"
max_batch_size: 8
input [{{ name: "IN" data_type: TYPE_FP32 dims: [ 16 ] }}]
output [{{ name: "OUT" data_type: TYPE_FP32 dims: [ 16 ] }}]
ensemble_scheduling {{
  step [
    {{ model_name: "{py}" model_version: -1 input_map {{ key: "INPUT0" value: "IN" }} output_map {{ key: "OUTPUT0" value: "mid" }} }},
    {{ model_name: "{onnx}" model_version: -1 input_map {{ key: "x" value: "mid" }} output_map {{ key: "y" value: "OUT" }} }}
  ]
}}
'''

# The floor: what any validator must do at least (interpreter start, proto import, list, read, parse).
FLOOR = r'''
import importlib.util, os, sys
from pathlib import Path
spec = importlib.util.find_spec("tritonclient")
path = Path(spec.submodule_search_locations[0], "grpc", "model_config_pb2.py")
s = importlib.util.spec_from_file_location("tritonclient.grpc.model_config_pb2", path)
pb = importlib.util.module_from_spec(s); sys.modules[s.name] = pb; s.loader.exec_module(pb)
from google.protobuf import text_format
root = sys.argv[1]
n = 0
for entry in os.scandir(root):
    if entry.is_dir():
        os.listdir(entry.path)
        try:
            with open(os.path.join(entry.path, "config.pbtxt"), "rb") as fh:
                text = fh.read().decode()
        except OSError:
            continue
        text_format.Parse(text, pb.ModelConfig())
        n += 1
print(n)
'''


def onnx_model() -> bytes:
    import onnx
    from onnx import helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 16])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def generate(root: Path, models: int) -> dict[str, int]:
    """Write ``models`` models: 40% Python, 40% ONNX, 20% ensembles over one of each."""
    graph = onnx_model()
    n_ens = models // 5
    n_py = (models - n_ens) // 2
    n_onnx = models - n_ens - n_py
    for i in range(n_py):
        folder = root / f"py_{i:04d}" / "1"
        folder.mkdir(parents=True)
        (folder.parent / "config.pbtxt").write_text(PY_CONFIG.format(name=f"py_{i:04d}"))
        (folder / "model.py").write_text(MODEL_PY)
    for i in range(n_onnx):
        folder = root / f"onnx_{i:04d}" / "1"
        folder.mkdir(parents=True)
        (folder.parent / "config.pbtxt").write_text(ONNX_CONFIG.format(name=f"onnx_{i:04d}"))
        (folder / "model.onnx").write_bytes(graph)
    for i in range(n_ens):
        folder = root / f"ens_{i:04d}" / "1"
        folder.mkdir(parents=True)
        config = ENSEMBLE_CONFIG.format(name=f"ens_{i:04d}", py=f"py_{i % n_py:04d}", onnx=f"onnx_{i % n_onnx:04d}")
        (folder.parent / "config.pbtxt").write_text(config)
    return {"python": n_py, "onnx": n_onnx, "ensemble": n_ens}


# ``repo-builder validate`` with the forked config parser switched off (scan.py's threshold raised).
SERIAL = r'''
import sys
from repo_builder.validate import scan
scan.PARALLEL_MIN_CONFIGS = 10**9
from repo_builder.cli.main import main
sys.exit(main(sys.argv[1:]))
'''


# Installed packages have their bytecode compiled; a checkout run with PYTHONDONTWRITEBYTECODE=1 would
# recompile every repo_builder module on each run. The bench keeps bytecode in its own temporary folder.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], expect: int = 0) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its children) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != expect:
        raise SystemExit(f"{' '.join(cmd[:3])} ... exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


# Exit codes other than 0 that a command must give: validate refuses an empty folder (RB001
# not-a-model-repository), which is still the cheapest run of the whole command, so the start-up cost.
EXPECTED_EXIT = {"start-up": 1}


def interleaved(commands: dict[str, list[str]], runs: int) -> dict[str, list[tuple[float, float]]]:
    """Run the commands in turn, ``runs`` rounds: the machine's noise then hits each of them alike."""
    out: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            out[name].append(timed(cmd, EXPECTED_EXIT.get(name, 0)))
    return out


PHASES = {
    "imports (all modules)": ("<frozen importlib._bootstrap>", "_find_and_load"),
    "scan: list + read + parse configs": ("scan.py", "scan_repository"),
    "rules (check_repository)": ("engine.py", "check_repository"),
    "reporter": ("reporters/__init__.py", "render_report"),  # the reporter registry's entry point
}


def profile(repo: Path, top: int) -> str:
    """Phases (cumulative) and the functions that spend the most time themselves, from one cProfile run."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "validate.prof"
        subprocess.run(
            [PYTHON, "-m", "cProfile", "-o", str(out), "-m", "repo_builder", "validate", str(repo), "--format", "json"],
            capture_output=True,
            check=False,
            env=ENV,
        )
        stats = pstats.Stats(str(out))
        total = max(ct for (_, _, _, ct, _) in stats.stats.values())
        phases = []
        for label, (file_part, func) in PHASES.items():
            cum = max(
                (ct for (f, _, name), (_, _, _, ct, _) in stats.stats.items() if name == func and file_part in f),
                default=0.0,
            )
            phases.append(f"{label:<36} {cum:7.3f} s  ({cum / total:5.1%})")
        buffer = io.StringIO()
        pstats.Stats(str(out), stream=buffer).sort_stats("tottime").print_stats(top)
        lines = [line.rstrip() for line in buffer.getvalue().splitlines()]
        first = next(i for i, line in enumerate(lines) if "ncalls" in line)
        body = "\n".join(line.replace(str(ROOT) + "/", "").replace(sys.prefix + "/", "") for line in lines[first:])
        header = f"whole run under cProfile: {total:.3f} s (profiling slows Python code ~2x; read shares)"
        return header + "\n" + "\n".join(phases) + "\n\n" + body.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md alone")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="validate-bench-"))
    ENV["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    try:
        repo = tmp / "models"
        repo.mkdir()
        mix = generate(repo, args.models)
        empty = tmp / "empty"
        empty.mkdir()
        commands = {
            "floor": [PYTHON, "-c", FLOOR, str(repo)],
            "validate": [REPO_BUILDER, "validate", str(repo), "--format", "json"],
            "serial": [PYTHON, "-c", SERIAL, "validate", str(repo), "--format", "json"],
            "start-up": [REPO_BUILDER, "validate", str(empty), "--format", "json"],
        }
        interleaved(commands, 1)  # warm the page cache and the bytecode caches, untimed
        results = interleaved(commands, args.runs)
        wall = {k: statistics.median(w for w, _ in v) for k, v in results.items()}
        cpu = {k: statistics.median(c for _, c in v) for k, v in results.items()}
        ratio_wall = wall["validate"] / wall["floor"]
        ratio_cpu = cpu["validate"] / cpu["floor"]
        ratio_serial = wall["serial"] / wall["floor"]
        labels = {
            "floor": f"floor: list + read + parse {args.models} configs (interpreter start included)",
            "validate": f"`repo-builder validate` ({args.models} models, json)",
            "serial": "the same, one process (forked config parser off)",
            "start-up": "`repo-builder validate` on an empty folder (start-up cost; refused: RB001)",
        }
        rows = ["| measurement | wall median (s) | CPU median (s) | wall runs (s) |", "| --- | --- | --- | --- |"]
        for key, label in labels.items():
            runs = ", ".join(f"{w:.3f}" for w, _ in results[key])
            rows.append(f"| {label} | {wall[key]:.3f} | {cpu[key]:.3f} | {runs} |")
        verdict = "meets" if ratio_wall <= TARGET_RATIO else "misses"
        md = (
            "## validate speed\n\n"
            f"Repository: {args.models} models ({mix['python']} Python, {mix['onnx']} ONNX with a small graph each, "
            f"{mix['ensemble']} two-step ensembles). {args.runs} interleaved rounds after one warm-up; "
            f"{os.cpu_count()} CPUs shared with other work (load average at the end: "
            f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}), so read the medians, the ratios, and CPU time "
            "(which the machine's load barely moves). Bytecode is cached as in an installed package "
            "(this environment sets PYTHONDONTWRITEBYTECODE=1, which alone adds ~0.1 s to each validate run).\n\n"
            + "\n".join(rows)
            + "\n\n"
            f"- validate: **{args.models / wall['validate']:.0f} models/s** wall; floor: "
            f"{args.models / wall['floor']:.0f} configs/s\n"
            f"- ratio validate / floor: **{ratio_wall:.2f}x wall**, {ratio_cpu:.2f}x CPU "
            f"({verdict} the target of <= {TARGET_RATIO:.0f}x wall); in one process: {ratio_serial:.2f}x wall, "
            f"{cpu['serial'] / cpu['floor']:.2f}x CPU\n"
            "- CPU time counts the forked parser too. The fork pays off in wall time only when a second CPU is "
            "free: on a loaded machine the two variants converge\n\n"
            "Where one validate run spends its time (cProfile: phases, then the top functions by own time; "
            "with two CPUs and no other thread, a forked child parses the configs of the last 55% of the folders while "
            "this process lists the folders and parses the rest; the child is not shown here):\n\n"
            "```\n" + profile(repo, 20) + "\n```\n"
        )
        print(md)
        if not args.no_write:
            write_section("validate", md)
        return 0 if ratio_wall <= TARGET_RATIO else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
