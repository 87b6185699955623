"""Hold the offline validator against the real tritonserver on N random repositories.

    .venv/bin/python scripts/bench/differential.py --examples 40 [--seed 7] [--record]

Counts the repositories and models compared and the agreements, writes the "differential" section of
BENCHMARKS.md, and prints every disagreement (the smallest repository that shows it, and the server's
message). ``--record`` keeps each one as a regression fixture under tests/triton/fixtures/differential/.

The referee is the embedded (CPU) tritonserver, so the offline side judges for a target without GPUs
(``ValidateOptions(gpu_present=False)``, in ``differential_cases.judge_folder``), not the default GPU server.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))  # support/: the differential cases the tests run
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from support.differential_cases import (  # noqa: E402
    Comparison,
    EnsembleCase,
    RepoCase,
    judge_folder,
    repo_cases,
    sweep_cases,
    with_prefix,
    write_case,
)

from repo_builder.triton.server import TritonServer, start_server  # noqa: E402

FIXTURES = ROOT / "tests" / "triton" / "fixtures" / "differential"


def smallest_case(case: RepoCase, model: str) -> RepoCase:
    """Just ``model`` and the models its ensemble steps name (the rest cannot matter to the server)."""
    ensembles = {e.name: e for e in case.ensembles}
    keep_models: set[str] = set()
    keep_ensembles: list[EnsembleCase] = []
    stack = [model.lstrip(".")]  # a hidden model folder is a case's model written with a leading dot
    while stack:
        name = stack.pop()
        if name in ensembles and ensembles[name] not in keep_ensembles:
            keep_ensembles.append(ensembles[name])
            stack.extend(ensembles[name].members)
        else:
            keep_models.add(name)
    return RepoCase(
        tuple(m for m in case.models if m.name in keep_models),
        tuple(e for e in case.ensembles if e in keep_ensembles),
    )


def record(server: TritonServer, work: Path, case: RepoCase, comparison: Comparison) -> Path | None:
    """Shrink to the disagreeing model, check it still disagrees, and keep it as a fixture."""
    key = hashlib.sha1(case.to_json().encode() + comparison.model.encode()).hexdigest()[:8]
    small = with_prefix(smallest_case(case, comparison.model), f"f{key}")
    write_case(work, small)
    results = judge_folder(server, work)
    if all(c.agrees for c in results):
        return None
    mutations = sorted(
        {m.mutation for m in small.models if m.mutation} | {e.mutation for e in small.ensembles if e.mutation}
    )
    target = FIXTURES / f"{'-'.join(mutations) or 'plain'}-{key}"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(work, target / "repo", ignore=shutil.ignore_patterns("__pycache__"))
    (target / "case.json").write_text(
        json.dumps(
            {
                "case": asdict(small),
                "offline": {c.model: {"ok": c.offline_ok, "errors": list(c.offline_errors)} for c in results},
                "server": {c.model: {"loaded": c.live_loaded, "reason": c.live_reason} for c in results},
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    return target


@dataclass
class Tally:
    """What one run compared: every comparison, the disagreements, and the repositories judged."""

    comparisons: list[Comparison] = field(default_factory=list)
    disagreements: list[tuple[RepoCase, Comparison]] = field(default_factory=list)
    repositories: list[str] = field(default_factory=list)
    sweep_labels: list[str] = field(default_factory=list)
    random_count: int = 0
    counter: Iterator[int] = field(default_factory=itertools.count)

    def judge(self, server: TritonServer, root: Path, case: RepoCase) -> None:
        write_case(root, case)
        for c in judge_folder(server, root):
            self.comparisons.append(c)
            if not c.agrees:
                self.disagreements.append((case, c))


def run_random(tally: Tally, server: TritonServer, root: Path, examples: int, chosen_seed: int) -> None:
    @seed(chosen_seed)
    @settings(
        max_examples=examples,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=tuple(HealthCheck),
        database=None,
    )
    @given(case=repo_cases(prefix="x"))
    def run(case: RepoCase) -> None:
        case = with_prefix(case, f"b{next(tally.counter)}")
        tally.repositories.append(case.to_json())
        tally.judge(server, root, case)

    run()
    tally.random_count = len(tally.comparisons)


def run_sweep(tally: Tally, server: TritonServer, root: Path) -> None:
    for label, case in sweep_cases().items():
        tally.sweep_labels.append(label)
        tally.judge(server, root, with_prefix(case, f"w{next(tally.counter)}"))


def markdown(tally: Tally, chosen_seed: int, elapsed: float) -> str:
    def row(label: str, repos: int, part: list[Comparison]) -> str:
        agree = sum(c.agrees for c in part)
        return f"| {label} | {repos} | {len(part)} | {agree} | {len(part) - agree} |"

    lines = [
        "Small repositories of Python-backend models and ensembles (tests/support/differential_cases.py), each",
        "model judged by the offline validator and by the real tritonserver 2.51 of nvidia-pytriton; an",
        "agreement is: no offline error exactly when the server loads the model.",
        "",
        "| cases | repositories | models compared | agreements | disagreements |",
        "|---|---:|---:|---:|---:|",
        row(f"random (hypothesis, seed {chosen_seed})", len(tally.repositories), tally.comparisons[: tally.random_count]),
    ]
    if tally.sweep_labels:
        lines.append(row("sweep: every mutation once", len(tally.sweep_labels), tally.comparisons[tally.random_count :]))
    lines += ["", f"{elapsed:.0f} s in all on this machine."]
    if tally.disagreements:
        lines += ["", "Disagreements (model: which way; the server's reason):", ""]
        seen = set()
        for _, c in tally.disagreements:
            side = "offline ok, server refused" if c.offline_ok else "offline refused, server loaded"
            text = f"- `{c.model}`: {side}; server: {c.live_reason or '-'}; offline: {'; '.join(c.offline_errors) or '-'}"
            if text not in seen:
                seen.add(text)
                lines.append(text)
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=40)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--record", action="store_true", help="keep disagreements as test fixtures")
    parser.add_argument("--no-report", action="store_true", help="do not write BENCHMARKS.md")
    parser.add_argument("--no-sweep", action="store_true", help="skip the every-mutation-once sweep")
    args = parser.parse_args()
    chosen_seed = args.seed if args.seed is not None else random.randrange(2**32)
    tally = Tally()
    recorded: list[Path] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="differential-") as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        with start_server(root, mode="explicit") as server:
            run_random(tally, server, root, args.examples, chosen_seed)
            if not args.no_sweep:
                run_sweep(tally, server, root)
            if args.record:
                found = (record(server, root, case, c) for case, c in tally.disagreements)
                recorded = [target for target in found if target is not None]
    text = markdown(tally, chosen_seed, time.monotonic() - started)
    print(text)
    if args.record:
        print(f"\nrecorded {len(recorded)} fixture(s) under {FIXTURES}")
    if not args.no_report:
        write_section("differential", text)
    return 0 if not tally.disagreements else 1


if __name__ == "__main__":
    sys.exit(main())
