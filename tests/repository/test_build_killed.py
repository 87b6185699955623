"""A build killed at random points (SIGKILL, SIGTERM, SIGINT), while the interface changes (``--top-k``),
leaves a repository that validates, with nothing of the build inside it.

The commit phase (moving staged models into place) takes milliseconds, so the build is slowed there with
REPO_BUILDER_COMMIT_PAUSE and half of the kills land inside it; the other half land while staging.
REPO_BUILDER_KILL_ROUNDS (default 3) sets how many kills each test sends; CI keeps the default.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repo_builder.cli.main import main
from repo_builder.render.parse_back import parse_config
from repo_builder.repository.lock import lock_path
from repo_builder.repository.manifest import MANIFEST_FILE
from repo_builder.repository.stage import STAGE_MARK, stage_prefix
from repo_builder.repository.versions import existing_versions, served_versions
from repo_builder.validate.engine import validate_repository

pytestmark = pytest.mark.slow
MODELS = {
    "clf_preprocess": ("model.py", "tokenizer/tokenizer.json"),
    "clf_model": ("model.py", "model.onnx"),
    "clf_postprocess": ("model.py", "labels.txt"),
    "clf": ("placeholder.txt",),
}
PAUSE = 0.1
ROUNDS = int(os.environ.get("REPO_BUILDER_KILL_ROUNDS", "3"))


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.text_classifier import export_text_classifier
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    root = tmp_path_factory.mktemp("killed")
    tiny = make_tiny_text_classifier(root / "tiny", num_labels=6)  # so each --top-k below changes the interface
    export_text_classifier(tiny, root / "export", check_parity=False)
    return root / "export"


def build_args(export: Path, repo: Path, *extra: str) -> list[str]:
    # --replace: the rounds change --top-k, hence the ensemble's output dims (an API change, issue 26).
    return ["build", "text-classifier", "--from-export", str(export), "--out", str(repo), "--name", "clf", "--runtime", "python",
            "--replace", *extra]


def assert_whole(repo: Path) -> None:
    """Only whole models (and the manifest) in the repository, each complete in the version it serves."""
    assert sorted(p.name for p in repo.iterdir()) in (sorted(MODELS), sorted([*MODELS, MANIFEST_FILE]))
    for name, files in MODELS.items():
        assert not [p for p in (repo / name).iterdir() if p.name.startswith(".")], "a hidden folder in a model"
        config = parse_config((repo / name / "config.pbtxt").read_text(), name)
        (version,) = served_versions(config, existing_versions(repo / name))
        for rel in files:
            assert (repo / name / str(version) / rel).is_file(), f"{name}/{version}/{rel} missing"
    report = validate_repository(repo)
    assert report.ok, [d.message for d in report.diagnostics]


def start_build(export: Path, repo: Path, *extra: str, pause: float = PAUSE) -> subprocess.Popen[str]:
    env = {**os.environ, "REPO_BUILDER_COMMIT_PAUSE": str(pause)}
    cmd = [sys.executable, "-m", "repo_builder", *build_args(export, repo, *extra)]
    return subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)


def wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout: float = 60.0) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            pytest.fail(f"build ended before printing '{prefix}'")
        if line.startswith(prefix):
            return
    pytest.fail(f"no '{prefix}' line within {timeout}s")


def kill_at_random(proc: subprocess.Popen[str], rng: random.Random, sig: signal.Signals, during_commit: bool) -> int:
    if during_commit:
        wait_for_line(proc, "writing ")  # rehearsal, then moves into place with PAUSE before each
        time.sleep(rng.uniform(0.0, PAUSE * 14))
    else:
        wait_for_line(proc, "runtime:")  # lock, stage, export files copied, models rendered
        time.sleep(rng.uniform(0.0, 0.4))
    proc.send_signal(sig)
    assert proc.stderr is not None
    proc.stderr.read()
    return proc.wait(timeout=60)


def rng_for_test() -> random.Random:
    seed = int(os.environ.get("KILL_SEED", time.time_ns() % 10_000))
    print(f"KILL_SEED={seed}")  # shown on failure: rerun with it
    return random.Random(seed)


def assert_no_stage_beside(repo: Path) -> None:
    assert not list(repo.parent.glob(stage_prefix(repo) + "*"))
    assert not lock_path(repo).exists()


def test_killed_build_leaves_valid_repository_when_sigkilled_at_random_points_with_top_k_changes(export: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert main(build_args(export, repo)) == 0
    rng = rng_for_test()
    for attempt in range(ROUNDS * 2):
        extra = ("--top-k", str(3 + attempt % 3))
        if attempt % 4 == 3:  # rebuild the served version itself: goes through a spare version
            newest = max(max(existing_versions(repo / name)) for name in MODELS)
            extra += ("--version", str(newest), "--force")
        proc = start_build(export, repo, *extra)
        kill_at_random(proc, rng, signal.SIGKILL, during_commit=attempt % 2 == 1)
        assert_whole(repo)
    # The next build completes and sweeps the killed builds' stages away.
    assert main(build_args(export, repo)) == 0
    assert_whole(repo)
    assert_no_stage_beside(repo)
    assert not list(repo.rglob(STAGE_MARK + "*"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interrupted_build_cleans_stage_and_lock_when_signalled_at_random_points(export: Path, tmp_path: Path, sig: signal.Signals) -> None:
    repo = tmp_path / "repo"
    assert main(build_args(export, repo)) == 0
    rng = rng_for_test()
    for attempt in range(ROUNDS):
        proc = start_build(export, repo, "--top-k", str(3 + attempt % 2))
        code = kill_at_random(proc, rng, sig, during_commit=attempt % 2 == 1)
        # 130: interrupted and cleaned up; 0: the signal came after the build; -15: SIGTERM before the
        # build installed its handler (nothing staged yet, so nothing to clean).
        assert code in (0, 130, -int(signal.SIGTERM))
        assert_whole(repo)
        assert_no_stage_beside(repo)  # cleaned up at once, not by the next build


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_killed_first_build_leaves_nothing_inside_out_when_killed_at_random_points(export: Path, tmp_path: Path, sig: signal.Signals) -> None:
    rng = rng_for_test()
    for attempt in range(max(2, ROUNDS // 2)):
        repo = tmp_path / f"repo{attempt}" / "out"
        proc = start_build(export, repo)
        kill_at_random(proc, rng, sig, during_commit=attempt % 2 == 1)
        if repo.exists():  # the first build appears whole, with one rename, or not at all
            assert_whole(repo)
        if sig is signal.SIGTERM:
            assert_no_stage_beside(repo)
            assert not repo.parent.exists() or repo.exists()  # no empty folders the build made


def test_second_build_fails_fast_naming_the_holder_when_two_builds_race(export: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert main(build_args(export, repo)) == 0
    first = start_build(export, repo, "--top-k", "3", pause=0.3)
    wait_for_line(first, "reading the export")  # holds the lock from before the export to the manifest
    second = subprocess.run(
        [sys.executable, "-m", "repo_builder", *build_args(export, repo, "--top-k", "4")], capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 3
    assert f"another build is writing it (PID {first.pid} holds" in second.stderr
    assert "Traceback" not in second.stderr
    assert first.stderr is not None
    first.stderr.read()
    assert first.wait(timeout=120) == 0
    assert_whole(repo)
    config = parse_config((repo / "clf" / "config.pbtxt").read_text(), "clf")
    assert list(config.output[0].dims) == [3]  # the first build's, untouched by the second


def test_racing_builds_leave_a_whole_repository_when_started_together(export: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert main(build_args(export, repo)) == 0
    for _ in range(max(1, ROUNDS // 2)):
        procs = [start_build(export, repo, "--top-k", str(k), pause=0.02) for k in (3, 4)]
        codes = []
        for proc in procs:
            assert proc.stderr is not None
            err = proc.stderr.read()
            codes.append(proc.wait(timeout=120))
            assert "Traceback" not in err
            if codes[-1] == 3:
                assert "another build is writing it (PID" in err
        assert sorted(codes) in ([0, 0], [0, 3])  # both in turn, or one refused at once
        assert_whole(repo)
        assert_no_stage_beside(repo)
