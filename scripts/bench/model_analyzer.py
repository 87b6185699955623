"""tune vs Model Analyzer, side by side on one repository and one time budget (issue 23, item 5).

Model Analyzer (PyPI ``triton-model-analyzer``) is run as its users run it: ``model-analyzer profile``
with ``--triton-launch-mode=local`` against the embedded tritonserver (started through a wrapper that sets
the library path and the Python backend's stubs exactly as repo-builder's launcher does), quick search,
every step CPU-only. It measures through ``perf_analyzer`` (PyPI ``perf-analyzer``). Both go into a venv
of their own (``--ma-venv``, created when missing): Model Analyzer pulls numpy 2, which the embedded
Triton's Python backend cannot use. ``repo-builder tune`` then searches the same repository with the same
time budget, and the script writes both outcomes (or Model Analyzer's exact error) as JSON.

    .venv/bin/python scripts/bench/model_analyzer.py REPOSITORY [--ma-venv DIR] [--budget-seconds 300]
        [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MA_PACKAGES = ("triton-model-analyzer", "perf-analyzer>=2")


def ensure_venv(venv: Path) -> Path:
    """Model Analyzer and perf_analyzer in their own venv (their numpy 2 must not reach the server's)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if not (venv / "bin" / "model-analyzer").exists():
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "triton-model-analyzer"], check=True)
    if perf_analyzer_binary(venv) is None:
        # perf-analyzer's real wheels are tagged manylinux_2_38; pip falls back to a 0.1.0 placeholder on an
        # older glibc, so the binary is fetched by tag and installed as a file (it still needs glibc 2.38 to run).
        wheels = venv / "wheels"
        subprocess.run(
            [str(python), "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(wheels), "perf-analyzer>=2",
             "--only-binary=:all:", "--platform", "manylinux_2_38_x86_64", "--python-version", "3.11"],
            check=True,
        )
        # pip refuses a wheel whose tag this machine lacks: unpack it (a wheel is a zip) into site-packages.
        site = next((venv / "lib").glob("python*/site-packages"))
        for wheel in wheels.glob("perf_analyzer-*.whl"):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(site)
        binary = perf_analyzer_binary(venv)
        if binary is not None:
            binary.chmod(0o755)
    return venv


def perf_analyzer_binary(venv: Path) -> Path | None:
    found = list((venv / "lib").glob("python*/site-packages/perf_analyzer/bin/perf_analyzer"))
    return found[0] if found else None


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


def run_model_analyzer(repository: Path, ensemble: str, steps: list[str], venv: Path, workdir: Path, budget: float,
                       perf_analyzer: Path | None = None) -> dict[str, Any]:
    binary = perf_analyzer or perf_analyzer_binary(venv)
    cmd = [
        str(venv / "bin" / "model-analyzer"), "profile",
        "--model-repository", str(repository), "--profile-models", ensemble,
        "--triton-launch-mode=local", "--triton-server-path", str(server_wrapper(workdir)),
        "--output-model-repository-path", str(workdir / "ma-out"), "--override-output-model-repository",
        "--checkpoint-directory", str(workdir / "ma-checkpoints"), "--export-path", str(workdir / "ma-results"),
        "--run-config-search-mode", "quick", "--cpu-only-composing-models", ",".join(steps),
    ]
    if binary is not None:
        cmd += ["--perf-analyzer-path", str(binary)]
    (workdir / "ma-results").mkdir(exist_ok=True)
    began = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=budget * 2, check=False)
        output = done.stdout + done.stderr
        code: int | None = done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = f"{exc.stdout or ''}{exc.stderr or ''}", None
    seconds = time.monotonic() - began
    failures = [line for line in output.splitlines() if "failed" in line.lower() or "not found" in line.lower()]
    measured = code == 0 and "has no data" not in output and not any("perf_analyzer failed" in f for f in failures)
    return {
        "command": " ".join(cmd), "exit_code": code, "seconds": round(seconds, 1), "measured": measured,
        "errors": sorted(set(failures))[:12], "perf_analyzer": str(binary) if binary else None,
    }


def run_tune(repository: Path, ensemble: str, budget: float, workdir: Path) -> dict[str, Any]:
    copy = workdir / "tune-repository"
    shutil.copytree(repository, copy)
    record = workdir / "tune.json"
    began = time.monotonic()
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "repo-builder"), "tune", str(copy), "--model", ensemble, "--max-seconds", str(budget),
         "--dry-run", "--json", str(record), "-q"],
        capture_output=True, text=True, check=False,
    )
    seconds = time.monotonic() - began
    doc = json.loads(record.read_text()) if record.exists() else {}
    best = next((c for c in doc.get("candidates", []) if c["id"] == doc.get("winner")), None)
    return {"exit_code": done.returncode, "seconds": round(seconds, 1), "best_items_per_s": best and best["items_per_s"],
            "best_p99_ms": best and best["p99_ms"], "candidates": len(doc.get("candidates", [])), "stderr_tail": done.stderr[-400:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repository", type=Path)
    parser.add_argument("--model", default=None, help="the ensemble (default: the only one)")
    parser.add_argument("--ma-venv", type=Path, default=Path(tempfile.gettempdir()) / "repo-builder-model-analyzer-venv")
    parser.add_argument("--budget-seconds", type=float, default=300.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--perf-analyzer", type=Path, default=None,
                        help="perf_analyzer for Model Analyzer (e.g. 2.51 from scripts/bench/perf_analyzer_251.py; PyPI's needs glibc 2.38)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from repo_builder.tune.flow import only_ensemble
    from repo_builder.tune.runner import tunable_steps

    ensemble = args.model or only_ensemble(args.repository)
    steps = list(tunable_steps(args.repository, ensemble))
    venv = ensure_venv(args.ma_venv)
    with tempfile.TemporaryDirectory(prefix="repo-builder-ma-") as tmp:
        work = Path(tmp)
        analyzer = run_model_analyzer(args.repository.resolve(), ensemble, steps, venv, work, args.budget_seconds,
                                      args.perf_analyzer)
        tuned = run_tune(args.repository, ensemble, args.budget_seconds, work)
    result = {
        "repository": str(args.repository), "ensemble": ensemble, "machine_glibc": os.confstr("CS_GNU_LIBC_VERSION"),
        "model_analyzer": analyzer, "tune": tuned, "tune_seconds": tuned["seconds"], "model_analyzer_seconds": analyzer["seconds"],
        # Throughput ratio at the same budget only when Model Analyzer measured anything.
        "tune_vs_model_analyzer": None,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
