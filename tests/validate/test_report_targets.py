"""Where ``--output`` and ``--format NAME=PATH`` may write (issue 20, ``repo_builder/safe_paths.py``): a
regular file is replaced atomically, ``/dev/stdout``-like streams are written in place, and a symlink, a
FIFO or a device is refused with exit 2 and left as it was."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.validate_repo_helpers import make_add_sub

from repo_builder.cli.main import main

REPO_BUILDER = str(Path(sys.executable).parent / "repo-builder")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    make_add_sub(tmp_path / "repo")
    return tmp_path / "repo"


@pytest.mark.parametrize("option", ["--output", "--format"])
def test_report_refused_and_link_kept_when_target_is_symlink(
    option: str, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "report.json"
    link.symlink_to(victim)
    args = ["--output", str(link)] if option == "--output" else ["--format", f"json={link}"]
    assert main(["validate", str(repo), *args]) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and len(err.strip().splitlines()) == 1
    assert link.is_symlink() and os.readlink(link) == str(victim)
    assert victim.read_text() == "precious"


def test_report_refused_and_fifo_kept_when_target_is_fifo(repo: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    done = subprocess.run([REPO_BUILDER, "validate", str(repo), "--format", f"junit={fifo}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "a FIFO" in done.stderr
    assert fifo.is_fifo()


def test_report_written_in_place_when_target_is_dev_stdout(repo: Path, tmp_path: Path) -> None:
    # /dev/stdout is a link to the process's stdout: here a file the shell would have opened with '>'.
    captured = tmp_path / "stdout.txt"
    with captured.open("w") as fh:
        done = subprocess.run([REPO_BUILDER, "validate", str(repo), "--format", "json=/dev/stdout"],
                              stdout=fh, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert '"schema_version"' in captured.read_text()
    assert os.path.islink("/dev/stdout")  # written through, never replaced by a rename


def test_report_refused_when_target_is_device(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(repo), "--output", "/dev/zero"]) == 2
    assert "a device" in capsys.readouterr().err


def test_report_replaces_regular_file_atomically_when_it_exists(repo: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.txt"
    report.write_text("old")
    inode = report.stat().st_ino
    assert main(["validate", str(repo), "--output", str(report)]) == 0
    assert "old" not in report.read_text() and report.stat().st_ino != inode
