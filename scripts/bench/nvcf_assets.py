"""Is taking an image from an NVCF asset as fast as receiving the same bytes in the request?

One resnet50 repository built with ``--nvcf-assets`` (random weights, the Python runtime), one embedded
tritonserver forwarding the NVCF headers, one photo. Each round measures the same closed-loop load twice,
in alternating order: the photo sent in the request as ``IMAGE``, and the photo written into an asset
folder under the repository's asset root and sent as an ``IMAGE_ASSET`` id with the two NVCF headers (as
``repo-builder bench --input IMAGE_ASSET=FILE`` does). Reported: medians over rounds of end-to-end p50
latency and requests/s, and of the preprocessing step's compute time per request (where the asset is
read, or the bytes are taken from the request), with the ratios asset / in-request. Target: ratio <= 1.

Usage: ``.venv/bin/python scripts/bench/nvcf_assets.py [--rounds 5] [--seconds 5]``; ``--quick`` checks
that it runs (1 short round, BENCHMARKS.md left alone). Writes the ``nvcf`` section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _report import write_section  # noqa: E402

PHOTO = (1920, 1080)


def build(out: Path, root: Path) -> None:
    from repo_builder.cli.main import main

    code = main(["build", "resnet50", "--weights", "random", "--runtime", "python", "--out", str(out), "--skip-parity", "-q",
                 "--nvcf-assets", "--asset-root", str(root)])
    if code != 0:
        raise SystemExit(f"build failed ({code})")


def run_variant(server: Any, plan: Any, concurrency: int, seconds: float, warmup: float) -> dict[str, float]:
    from repo_builder.triton.bench import ensemble_members, measure, payloads_for

    config = server.client.get_model_config("resnet50").config
    payloads = payloads_for(config, plan.files)
    result, steps = measure(server.client, server.grpc_url, "resnet50", payloads, concurrency=concurrency, seconds=seconds,
                            warmup=warmup, steps=ensemble_members(config), headers=plan.headers)
    if result.errors:
        raise SystemExit(f"{result.errors} failed requests: {result.first_error}")
    pre = next(s for s in steps if s.model == "resnet50_preprocess")
    return {"p50_ms": result.p50_ms, "requests_per_s": result.requests_per_s, "preprocess_ms": pre.compute_ms}


def measure_all(repo: Path, photo: bytes, rounds: int, seconds: float, warmup: float, concurrencies: list[int]) -> dict[str, Any]:
    from repo_builder.triton import start_server
    from repo_builder.triton.bench_assets import SERVER_ARGS, asset_requests

    runs: dict[str, dict[int, list[dict[str, float]]]] = {"in-request": {}, "asset": {}}
    with asset_requests(repo, ["resnet50"], {"IMAGE_ASSET": [photo]}) as assets, \
            start_server(repo, mode="explicit", extra_args=SERVER_ARGS) as server:
        server.load("resnet50", timeout=300)
        from repo_builder.triton.bench_assets import ModelRequests

        plans = {"in-request": ModelRequests({"IMAGE": [photo]}), "asset": assets["resnet50"]}
        for concurrency in concurrencies:
            for index in range(rounds):
                order = ("in-request", "asset") if index % 2 == 0 else ("asset", "in-request")
                for variant in order:
                    figures = run_variant(server, plans[variant], concurrency, seconds, warmup)
                    runs[variant].setdefault(concurrency, []).append(figures)
                    print(f"c={concurrency} round {index + 1} {variant}: {json.dumps({k: round(v, 2) for k, v in figures.items()})}", flush=True)
    return runs


def summarize(runs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for concurrency in runs["asset"]:
        med = {v: {k: statistics.median(r[k] for r in runs[v][concurrency]) for k in ("p50_ms", "requests_per_s", "preprocess_ms")}
               for v in ("in-request", "asset")}
        out[str(concurrency)] = {
            **med,
            "ratio_p50": med["asset"]["p50_ms"] / med["in-request"]["p50_ms"],
            "ratio_preprocess": med["asset"]["preprocess_ms"] / med["in-request"]["preprocess_ms"],
            "ratio_throughput": med["asset"]["requests_per_s"] / med["in-request"]["requests_per_s"],
        }
    return out


def markdown(summary: dict[str, Any], rounds: int, seconds: float, size: int) -> str:
    rows = ["| concurrency | path | p50 ms | requests/s | preprocess step ms/request |", "|---:|---|---:|---:|---:|"]
    lines = []
    for concurrency, figures in summary.items():
        for variant in ("in-request", "asset"):
            m = figures[variant]
            rows.append(f"| {concurrency} | {variant} | {m['p50_ms']:.1f} | {m['requests_per_s']:.2f} | {m['preprocess_ms']:.2f} |")
        lines.append(f"- concurrency {concurrency}: asset / in-request **p50 {figures['ratio_p50']:.3f}x**, preprocessing step "
                     f"{figures['ratio_preprocess']:.3f}x, throughput {figures['ratio_throughput']:.3f}x")
    return (
        "## NVCF assets: an image from an asset vs the same bytes in the request\n\n"
        f"`scripts/bench/nvcf_assets.py`: resnet50 built with `--nvcf-assets` (random weights, Python runtime), one embedded "
        f"tritonserver 2.51 forwarding `NVCF-.*`, one {PHOTO[0]}x{PHOTO[1]} JPEG ({size} bytes) sent as `IMAGE` or read from an "
        f"asset folder as `IMAGE_ASSET` (gRPC, the headers as metadata). Medians of {rounds} alternating rounds of {seconds:g} s "
        f"each; {os.cpu_count()} CPUs shared with other work (load average at the end: "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}).\n\n"
        + "\n".join(rows) + "\n\n" + "\n".join(lines) + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--quick", action="store_true", help="one short round at concurrency 1; BENCHMARKS.md left alone")
    parser.add_argument("--no-write", action="store_true", help="print only, leave BENCHMARKS.md alone")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    rounds, seconds, warmup = (1, 1.0, 0.5) if args.quick else (args.rounds, args.seconds, args.warmup)
    concurrencies = [1] if args.quick else [int(c) for c in args.concurrency.split(",")]
    from repo_builder.triton.synthesize import sample_image

    photo = sample_image(*PHOTO)
    tmp = Path(tempfile.mkdtemp(prefix="nvcf-bench-"))
    try:
        (tmp / "assets").mkdir()
        build(tmp / "repo", tmp / "assets")
        summary = summarize(measure_all(tmp / "repo", photo, rounds, seconds, warmup, concurrencies))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    md = markdown(summary, rounds, seconds, len(photo))
    print(md)
    if args.json is not None:
        args.json.write_text(json.dumps({"quick": args.quick, "summary": summary}, indent=2), encoding="utf-8")
    if not (args.quick or args.no_write):
        write_section("nvcf", md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
