#!/usr/bin/env python3
"""Benchmark: ResNet50 export time and peak memory (medians over fresh processes), written to BENCHMARKS.md.

Each run is its own Python process, so imports, caches and peak RSS never carry over between runs. The
TorchScript exporter (the one repo-builder uses) is measured as `export_resnet50` does it; the dynamo
exporter is measured alongside as the alternative the choice was made against.

    .venv/bin/python scripts/bench/export_resnet50.py [--runs 5] [--dynamo-runs 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section


def _peak_rss_mb() -> float:
    """VmHWM: this process's peak resident memory so far (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_torchscript(out: Path) -> dict[str, float | str]:
    start = time.perf_counter()
    from repo_builder.export.resnet50 import export_resnet50, load_resnet50

    load_resnet50("random")  # warm torchvision's import outside the timed export
    imported = time.perf_counter()
    before = _peak_rss_mb()
    t0 = time.perf_counter()
    artifact = export_resnet50(out, weights="random", check_parity=False)
    export_s = time.perf_counter() - t0
    peak_export = _peak_rss_mb()
    # Again in the same process: torch's one-time start-up (oneDNN kernels, exporter imports) is paid.
    t_warm = time.perf_counter()
    export_resnet50(out / "warm", weights="random", check_parity=False)
    warm_s = time.perf_counter() - t_warm
    t1 = time.perf_counter()
    artifact = export_resnet50(out / "with-parity", weights="random", check_parity=True)
    with_parity_s = time.perf_counter() - t1
    return {
        "import_s": imported - start,
        "export_s": export_s,
        "export_warm_s": warm_s,
        "export_with_parity_s": with_parity_s,
        "rss_before_mb": before,
        "peak_export_mb": peak_export,
        "peak_with_parity_mb": _peak_rss_mb(),
        "onnx_mb": artifact.onnx_path.stat().st_size / 1e6,
        "max_abs_error": max(p.max_abs_error for p in artifact.signature.parity),
    }


def child_dynamo(out: Path) -> dict[str, float | str]:
    import numpy as np
    import torch

    from repo_builder.export.parity import image_cases, run_parity, torch_reference
    from repo_builder.export.resnet50 import load_resnet50

    model, _ = load_resnet50("random")
    before = _peak_rss_mb()
    example = torch.randn(2, 3, 224, 224)
    path = out / "model.onnx"
    t0 = time.perf_counter()
    batch = torch.export.Dim("batch", min=1, max=64)
    torch.onnx.export(
        model,
        (example,),
        str(path),
        dynamo=True,
        input_names=["pixel_values"],
        output_names=["logits"],
        dynamic_shapes=({0: batch},),
        opset_version=18,
    )
    export_s = time.perf_counter() - t0
    files = sorted(p.name for p in out.iterdir())
    results = run_parity(
        path,
        torch_reference(model, ["pixel_values"]),
        image_cases("pixel_values", (1, 4, 8), [(224, 224)]),
        fail=False,
    )
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    return {
        "export_s": export_s,
        "rss_before_mb": before,
        "peak_export_mb": _peak_rss_mb(),
        "onnx_mb": size / 1e6,
        "files": " + ".join(files),
        "max_abs_error": float(np.max([r.max_abs_error for r in results])),
    }


def run_child(kind: str) -> dict[str, float | str]:
    with tempfile.TemporaryDirectory(prefix="bench-export-") as tmp:
        proc = subprocess.run(
            [sys.executable, __file__, "--child", kind, tmp], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise SystemExit(f"{kind} run failed:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])


def median(runs: list[dict[str, float | str]], key: str) -> float:
    return statistics.median(float(r[key]) for r in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dynamo-runs", type=int, default=3, help="0 skips the dynamo comparison")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, folder = args.child
        result = (child_torchscript if kind == "torchscript" else child_dynamo)(Path(folder))
        print(json.dumps(result))
        return 0

    import torch

    ts = [run_child("torchscript") for _ in range(args.runs)]
    dyn = [run_child("dynamo") for _ in range(args.dynamo_runs)]
    lines = [
        "## Export: ResNet50 to ONNX",
        "",
        f"Medians over fresh processes on {platform.machine()} with {_cpu_count()} CPU cores, "
        f"torch {torch.__version__}, random weights (same graph and size as IMAGENET1K_V2). "
        "Peak memory is the process's peak resident set (VmHWM), which includes torch itself.",
        "",
        "| exporter | runs | export s (first in process) | export s (repeat) | export + parity s | "
        "peak RSS MB (before export) | output | max abs error vs torch |",
        "|---|---:|---:|---:|---:|---:|---|---:|",
        f"| TorchScript, `dynamo=False` (used) | {len(ts)} | {median(ts, 'export_s'):.2f} | "
        f"{median(ts, 'export_warm_s'):.2f} | {median(ts, 'export_with_parity_s'):.2f} | {median(ts, 'peak_export_mb'):.0f} "
        f"({median(ts, 'rss_before_mb'):.0f}) | model.onnx, {median(ts, 'onnx_mb'):.1f} MB | "
        f"{max(float(r['max_abs_error']) for r in ts):.1e} |",
    ]
    if dyn:
        lines.append(
            f"| dynamo (opset 18) | {len(dyn)} | {median(dyn, 'export_s'):.2f} | n/a | n/a | "
            f"{median(dyn, 'peak_export_mb'):.0f} ({median(dyn, 'rss_before_mb'):.0f}) | "
            f"{dyn[0]['files']}, {median(dyn, 'onnx_mb'):.1f} MB | {max(float(r['max_abs_error']) for r in dyn):.1e} |"
        )
    lines += [
        "",
        "Export time covers `export_resnet50` without parity (trace, write, `onnx.checker`, signature), "
        "weights already loaded; the first export in a process also pays torch's one-time start-up. "
        "Export + parity is a repeat export plus ONNX Runtime and PyTorch at batch 1, 4 and 8. "
        f"Peak RSS with parity: {median(ts, 'peak_with_parity_mb'):.0f} MB. "
        f"Import of torch + torchvision: {median(ts, 'import_s'):.1f} s. "
        "Reproduce: `.venv/bin/python scripts/bench/export_resnet50.py`.",
    ]
    markdown = "\n".join(lines)
    write_section("export", markdown)
    print(markdown)
    return 0


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main())
