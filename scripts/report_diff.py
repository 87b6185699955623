"""validate's reports from a base revision and from this checkout, compared: a change meant to make validate
faster (or tidier) must not change one finding.

    .venv/bin/python scripts/report_diff.py BASE [--corpus DIR]... [--from-tests] [--models 300]

BASE is a git revision (checked out into a temporary worktree) or a folder holding a checkout. The corpus:
Triton's conformance cases (``shared/conformance``), ``validate_speed.py``'s generated repository, every
repository found under each ``--corpus`` folder, and with ``--from-tests`` the repositories tests/validate
builds (its run's temporary folders). Each checkout renders the JSON report of every repository under three
option sets (default, ``--strict``, a CPU-only target) in a process of its own; any difference is printed,
and the exit code is 1. Issue 38 item 8 (validate's speed) was checked this way, change by change.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable

# Runs in each checkout's own interpreter (PYTHONPATH=<checkout>): every report of the corpus, as JSON.
RENDER = r"""
import json, sys
from pathlib import Path
import repo_builder
from repo_builder.errors import UserError
from repo_builder.validate import scan
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import ValidateOptions
from repo_builder.validate.reporters import render_report

checkout, corpus, out_path = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
if not Path(repo_builder.__file__).resolve().is_relative_to(checkout.resolve()):
    sys.exit(f"imported repo_builder from {repo_builder.__file__}, not from {checkout}")
scan.PARALLEL_MIN_CONFIGS = 10**9  # one process: the forked parser is timing, not behaviour
options = {"default": ValidateOptions(), "strict": ValidateOptions(strict=True), "cpu": ValidateOptions(gpu_present=False)}
out = {}
for repo in json.loads(Path(corpus).read_text(encoding="utf-8")):
    for name, opts in options.items():
        key = f"{repo}|{name}"
        try:
            report = validate_repository(repo, opts)
            out[key] = [report.exit_code(), json.loads(render_report(report, "json"))]
        except UserError as exc:
            out[key] = ["usage error", str(exc)]
        except Exception as exc:  # a crash is a result to compare too
            out[key] = ["crash", repr(exc)]
Path(out_path).write_text(json.dumps(out, sort_keys=True), encoding="utf-8")
"""


def repositories_under(folder: Path) -> set[Path]:
    """Every folder under ``folder`` that holds a model folder (one with a config.pbtxt), and each model
    folder's grandparent too: a repository nested in a test's temporary folder is found either way."""
    found: set[Path] = set()
    for config in folder.rglob("config.pbtxt"):
        found.update((config.parent.parent, config.parent.parent.parent))
    return {p for p in found if p.is_dir() and p.is_relative_to(folder)}


def differences(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The keys (repository|options) whose report differs, or exists on one side only, sorted."""
    return sorted(k for k in set(base) | set(new) if base.get(k) != new.get(k))


def _conformance(dest: Path) -> Iterable[Path]:
    from repo_builder.validate.conformance import case_runs, find_suite, load_cases, materialize_case

    suite = find_suite(ROOT)
    if suite is None:
        print("report_diff: no conformance suite found (shared/conformance); left out", file=sys.stderr)
        return
    runs = [run for case in load_cases(suite) for run in case_runs(case)]
    for i, run in enumerate(runs):
        yield materialize_case(run, dest / f"case{i}")


def _generated(dest: Path, models: int) -> Path:
    spec = importlib.util.spec_from_file_location("validate_speed", ROOT / "scripts" / "bench" / "validate_speed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dest.mkdir(parents=True)
    module.generate(dest, models)
    return dest


def _from_tests(dest: Path) -> Path:
    done = subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "tests/validate", f"--basetemp={dest}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"report_diff: tests/validate failed, so its repositories are no corpus:\n{done.stdout[-2000:]}")
    return dest


def _render(checkout: Path, corpus: Path, out: Path) -> dict[str, Any]:
    # Run in the checkout: ``python -c`` puts the working folder first on sys.path, before PYTHONPATH and the
    # editable install (RENDER refuses to run on any other checkout's code).
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([PYTHON, "-c", RENDER, str(checkout), str(corpus), str(out)], env=env, cwd=checkout, check=False)
    if done.returncode != 0:
        sys.exit(f"report_diff: rendering the reports of {checkout} failed (exit {done.returncode})")
    reports: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return reports


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="a git revision, or a folder holding a checkout")
    parser.add_argument("--corpus", type=Path, action="append", default=[], help="a folder of repositories (repeatable)")
    parser.add_argument("--from-tests", action="store_true", help="also the repositories tests/validate builds")
    parser.add_argument("--models", type=int, default=300, help="models in the generated repository")
    parser.add_argument("--no-conformance", action="store_true", help="leave Triton's conformance cases out")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="report-diff-") as tmp_text:
        tmp = Path(tmp_text)
        worktree = None
        base = Path(args.base)
        if not base.is_dir():
            worktree = tmp / "base"
            subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(worktree), args.base], cwd=ROOT, check=True)
            base = worktree
        try:
            repos = {_generated(tmp / "generated", args.models)}
            if not args.no_conformance:
                repos.update(_conformance(tmp / "conformance"))
            for folder in [*args.corpus, *([_from_tests(tmp / "tests")] if args.from_tests else [])]:
                repos.update(repositories_under(folder.resolve()))
            corpus = tmp / "corpus.json"
            corpus.write_text(json.dumps(sorted(map(str, repos))), encoding="utf-8")
            old, new = _render(base, corpus, tmp / "base.json"), _render(ROOT, corpus, tmp / "new.json")
        finally:
            if worktree is not None:
                subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, check=False)
    differing = differences(old, new)
    for key in differing[:5]:
        print(f"DIFFERS {key}\n  base: {json.dumps(old.get(key))[:1500]}\n  new:  {json.dumps(new.get(key))[:1500]}")
    crashes = sum(1 for value in new.values() if value[0] == "crash")
    print(f"{len(differing)} of {len(new)} reports differ ({len(repos)} repositories x 3 option sets); crashes here: {crashes}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
