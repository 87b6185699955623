"""The two-process config parse of ``scan.scan_repository``: same answer as a serial scan, a safe
fallback whenever the child cannot help, and no fork at all when the process has other threads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from repo_builder.validate import scan

CONFIG = 'name: "{name}"\nbackend: "python"\nmax_batch_size: 8\n'
BROKEN = 'backend: "python"\nmax_batch_size: oops\n'

# Run in a fresh interpreter: the pytest process may have threads, which (rightly) turn the fork off.
PRELUDE = """
import os, sys
from repo_builder.validate import scan
if not scan._can_fork():
    print("skip")
    raise SystemExit(0)
forks = []
real_fork = os.fork
os.fork = lambda: forks.append(1) or real_fork()
"""


def make_repository(root: Path, count: int) -> Path:
    for i in range(count):
        folder = root / f"m{i:03d}"
        (folder / "1").mkdir(parents=True)
        (folder / "config.pbtxt").write_text(BROKEN if i % 9 == 0 else CONFIG.format(name=f"m{i:03d}"))
    return root


def run_fresh(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "skip":
        pytest.skip(reason="needs two CPUs and a single-threaded process to fork a parser")
    return done.stdout.strip()


@pytest.fixture
def many(tmp_path: Path) -> Path:
    return make_repository(tmp_path / "models", scan.PARALLEL_MIN_CONFIGS + 6)


SERIAL = """
parallel_min = scan.PARALLEL_MIN_CONFIGS
scan.PARALLEL_MIN_CONFIGS = 10**9
serial = scan.scan_repository(root)
scan.PARALLEL_MIN_CONFIGS = parallel_min
"""


def test_scan_repository_parses_serially_when_child_process_fails(many: Path) -> None:
    out = run_fresh(f"""
root = {str(many)!r}
{SERIAL}
def boom(paths):
    raise RuntimeError("child dies")
scan._parse_in_child = boom
parallel = scan.scan_repository(root)
assert forks, "no fork"
assert parallel == serial
try:
    os.waitpid(-1, os.WNOHANG)
    print("zombie left")
except ChildProcessError:
    print("reaped", sum(1 for m in parallel.models if m.config is None))
""")
    assert out == f"reaped {len(range(0, scan.PARALLEL_MIN_CONFIGS + 6, 9))}"


@pytest.mark.parametrize("answer", ["[(b'\\xff\\xff\\xff', None, None, None, None)] * len(paths)", "[]"])
def test_scan_repository_parses_serially_when_child_sends_garbage(many: Path, answer: str) -> None:
    out = run_fresh(f"""
root = {str(many)!r}
{SERIAL}
scan._parse_in_child = lambda paths: {answer}
parallel = scan.scan_repository(root)
assert forks, "no fork"
print(parallel == serial, sum(1 for m in parallel.models if m.config is not None))
""")
    assert out == f"True {scan.PARALLEL_MIN_CONFIGS + 6 - len(range(0, scan.PARALLEL_MIN_CONFIGS + 6, 9))}"


def test_scan_repository_uses_only_listed_configs_when_child_parses_folders(many: Path) -> None:
    (many / "m205" / "config.pbtxt").unlink()  # in the child's half: a folder without a config
    (many / "zz_file_only").write_text("not a folder")
    out = run_fresh(f"""
root = {str(many)!r}
{SERIAL}
parallel = scan.scan_repository(root)
assert forks, "no fork"
m = parallel.model("m205")
print(parallel == serial, m.config is None, m.config_problem is None, m.has_config_file)
""")
    assert out == "True True True False"


def test_scan_repository_does_not_fork_when_python_thread_runs(many: Path) -> None:
    out = run_fresh(f"""
import threading
stop = threading.Event()
worker = threading.Thread(target=stop.wait)
worker.start()
try:
    repo = scan.scan_repository({str(many)!r})
finally:
    stop.set()
    worker.join()
print(len(forks), len(repo.models))
""")
    assert out == f"0 {scan.PARALLEL_MIN_CONFIGS + 6}"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts native threads through Linux's /proc")
def test_single_threaded_is_false_when_native_thread_runs() -> None:
    code = """
import faulthandler, threading
from repo_builder.validate import scan
before = scan._single_threaded()
faulthandler.dump_traceback_later(600)  # a C watchdog thread that the threading module never sees
try:
    print(before, threading.active_count(), scan._single_threaded(), scan._can_fork())
finally:
    faulthandler.cancel_dump_traceback_later()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "1", "False", "False"]
