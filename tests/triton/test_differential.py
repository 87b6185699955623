"""The offline validator against the real server, on random repositories and on kept regressions.

Every model's offline verdict (no error diagnostics) must equal the server's (it loaded). Cases that
once disagreed live in ``fixtures/differential/<case>/repo`` (with the server's verdicts at the time in
``case.json``) and are replayed on every run; ``scripts/bench/differential.py --record`` adds new ones.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from support.differential_cases import (
    RepoCase,
    describe,
    judge_folder,
    repo_cases,
    sweep_cases,
    with_prefix,
    write_case,
)

from repo_builder.triton.server import TritonServer, start_server

pytestmark = [pytest.mark.triton, pytest.mark.slow]

FIXTURES = Path(__file__).parent / "fixtures" / "differential"
EXAMPLES = 10
_counter = itertools.count()


@pytest.fixture(scope="module")
def differential_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TritonServer, Path]]:
    root = tmp_path_factory.mktemp("differential") / "repo"
    root.mkdir()
    with start_server(root, mode="explicit") as server:
        yield server, root


def test_offline_verdict_equals_server_when_repository_is_random(
    differential_server: tuple[TritonServer, Path],
) -> None:
    server, root = differential_server
    failures: list[str] = []
    compared: list[int] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,  # the same cases on every CI run; the bench script explores at random
        phases=(Phase.explicit, Phase.generate),  # shrinking would reload models for minutes
        suppress_health_check=tuple(HealthCheck),
        database=None,
    )
    @given(case=repo_cases(prefix="x"))
    def check(case: RepoCase) -> None:
        case = with_prefix(case, f"c{next(_counter)}")
        write_case(root, case)
        comparisons = judge_folder(server, root)
        compared.append(len(comparisons))
        disagreement = describe(comparisons)
        if disagreement:
            failures.append(f"{case.to_json()}\n{disagreement}")

    check()
    assert sum(compared) >= 2 * EXAMPLES  # every case has at least two models
    assert not failures, "offline and live verdicts differ:\n\n" + "\n\n".join(failures)


@pytest.mark.parametrize("which", ["models", "restarting-models", "ensembles"])
def test_offline_verdict_equals_server_when_every_mutation_is_swept(
    differential_server: tuple[TritonServer, Path], which: str
) -> None:
    server, root = differential_server
    case = sweep_cases()[which]
    write_case(root, with_prefix(case, f"w{next(_counter)}"))
    comparisons = judge_folder(server, root)
    assert len(comparisons) == len(case.models) + len(case.ensembles)
    assert not describe(comparisons), describe(comparisons)


def _fixture_cases() -> list[Path]:
    return sorted(p for p in FIXTURES.iterdir() if (p / "repo").is_dir()) if FIXTURES.is_dir() else []


@pytest.mark.parametrize("case_dir", _fixture_cases(), ids=lambda p: p.name)
def test_offline_verdict_equals_server_when_case_once_disagreed(
    differential_server: tuple[TritonServer, Path], case_dir: Path
) -> None:
    server, root = differential_server
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(case_dir / "repo", root)
    comparisons = judge_folder(server, root)
    recorded = json.loads((case_dir / "case.json").read_text(encoding="utf-8"))["server"]
    # The fixture still means what it meant: the server's verdicts are the recorded ones.
    assert {c.model: c.live_loaded for c in comparisons} == {k: v["loaded"] for k, v in recorded.items()}
    assert not describe(comparisons), describe(comparisons)
