"""bench's bound on clients (issue 26): a level the machine cannot run is refused at once, with the limit
and why; big levels show progress."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from repo_builder.errors import UserError
from repo_builder.triton.bench_limits import (
    PROGRESS_FROM,
    ClientLimit,
    check_concurrency,
    client_limit,
    start_progress,
)


def test_client_limit_is_bounded_by_open_files_when_ulimit_is_low() -> None:
    limit = client_limit(open_files=1024, cores=8)
    assert limit.clients == (1024 - 256) // 8 and "open-files limit is 1024" in limit.why


def test_client_limit_is_bounded_by_cores_when_files_are_plenty() -> None:
    limit = client_limit(open_files=1 << 20, cores=2)
    assert limit.clients == 512 and "per core (2 cores here)" in limit.why


def test_check_concurrency_refuses_with_the_limit_and_why_when_a_level_is_too_high() -> None:
    limit = ClientLimit(100, "because")
    check_concurrency((1, 100), limit)
    with pytest.raises(UserError, match=r"--concurrency 5000: this machine can run at most 100 clients: because"):
        check_concurrency((1, 5000, 200), limit)


def test_start_progress_logs_every_batch_of_clients_only_when_the_level_is_big() -> None:
    lines: list[str] = []
    started = start_progress(PROGRESS_FROM * 2, lines.append)
    for count in range(1, PROGRESS_FROM * 2 + 1):
        started(count)
    assert lines == [f"  started {PROGRESS_FROM}/{PROGRESS_FROM * 2} clients", f"  started {PROGRESS_FROM * 2}/{PROGRESS_FROM * 2} clients"]
    small: list[str] = []
    quiet = start_progress(4, small.append)
    for count in range(1, 5):
        quiet(count)
    assert small == []


def test_bench_answers_within_30_s_when_concurrency_is_beyond_the_machine(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.pbtxt").write_text('backend: "python"\n')
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "repo_builder", "bench", str(tmp_path), "--concurrency", "100000", "--seconds", "1"],
        capture_output=True, text=True, timeout=30,
    )
    assert time.monotonic() - started < 30
    assert done.returncode == 2, done.stderr
    assert "--concurrency 100000: this machine can run at most" in done.stderr and "clients:" in done.stderr


def test_wait_logs_the_time_left_while_a_big_level_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from repo_builder.triton import bench

    monkeypatch.setattr(bench, "PROGRESS_SECONDS", 0.05)
    threads = [threading.Thread(target=time.sleep, args=(0.3,)) for _ in range(3)]
    for thread in threads:
        thread.start()
    lines: list[str] = []
    bench._wait(threads, time.perf_counter() + 0.15, lines.append)
    assert lines and lines[0].startswith("  measuring: ") and lines[-1] == "  waiting for the last answers"
    assert not any(t.is_alive() for t in threads)
