"""A build killed with SIGKILL at random points leaves a repository that still validates.

The commit phase (moving staged models into place) takes milliseconds, so the build is slowed there with
REPO_BUILDER_COMMIT_PAUSE and half of the kills land inside it; the other half land while staging.
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
from repo_builder.repository.writer import STAGE_PREFIX
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.scan import parse_version_name

pytestmark = pytest.mark.slow
MODELS = {
    "clf_preprocess": ("model.py", "tokenizer/tokenizer.json"),
    "clf_model": ("model.py", "model.onnx"),
    "clf_postprocess": ("model.py", "labels.txt"),
    "clf": ("placeholder.txt",),
}
PAUSE = 0.15


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.text_classifier import export_text_classifier
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    root = tmp_path_factory.mktemp("killed")
    tiny = make_tiny_text_classifier(root / "tiny")
    export_text_classifier(tiny, root / "export", check_parity=False)
    return root / "export"


def assert_whole(repo: Path) -> None:
    """Every model is complete in its loaded (latest) version, and nothing half-written is a model."""
    assert sorted(p.name for p in repo.iterdir() if p.is_dir()) == sorted(MODELS)
    for name, files in MODELS.items():
        assert (repo / name / "config.pbtxt").is_file()
        numbers = [n for n, _ in (parse_version_name(p.name) for p in (repo / name).iterdir() if p.is_dir()) if n is not None]
        latest = repo / name / str(max(numbers))
        for rel in files:
            assert (latest / rel).is_file(), f"{latest / rel} missing"
    report = validate_repository(repo)
    assert report.ok, [d.message for d in report.diagnostics]


def start_build(export: Path, repo: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "REPO_BUILDER_COMMIT_PAUSE": str(PAUSE)}
    cmd = [sys.executable, "-m", "repo_builder", "build", "text-classifier", "--from-export", str(export), "--out", str(repo), "--name", "clf", "--runtime", "python", *extra]
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


def test_killed_build_leaves_valid_repository_when_killed_at_random_points(export: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert main(["build", "text-classifier", "--from-export", str(export), "--out", str(repo), "--name", "clf", "--runtime", "python"]) == 0
    rng = random.Random(int(os.environ.get("KILL_SEED", time.time_ns() % 10_000)))
    for attempt in range(6):
        extra = ("--version", "1", "--force") if attempt % 3 == 2 else ()
        proc = start_build(export, repo, *extra)
        if attempt % 2 == 0:
            wait_for_line(proc, "runtime:")  # staging: export files being copied, models rendered
            time.sleep(rng.uniform(0.0, 0.3))
        else:
            wait_for_line(proc, "writing ")  # commit: models moving into place, PAUSE between moves
            time.sleep(rng.uniform(0.0, PAUSE * 9))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert_whole(repo)
    # The next build completes and sweeps the killed builds' staging folders away.
    assert main(["build", "text-classifier", "--from-export", str(export), "--out", str(repo), "--name", "clf", "--runtime", "python"]) == 0
    assert_whole(repo)
    assert not list(repo.rglob(STAGE_PREFIX + "*"))
