"""Triton's statistics as tests read them: after they settle."""

from __future__ import annotations

import time

from repo_builder.triton.client import connect


def served_counts(
    grpc_url: str, model: str, at_least: int = 0, timeout: float = 10.0, settle: float = 0.0
) -> tuple[int, int]:
    """(requests, executions) from Triton's statistics, once `at_least` requests are counted and, with `settle`,
    once they have not changed for that many seconds.

    Triton records a Python step's statistics after `execute` returns, which can be after the client already has
    its response; reading them at once can miss the last execution. A count taken before a test's requests
    settles, so the requests answered just before are in it (CI once read (0, 0) there, then counted them).
    """
    deadline = time.monotonic() + timeout
    last: tuple[int, int] | None = None
    since = time.monotonic()
    while True:
        stats = connect(grpc_url).get_inference_statistics(model).model_stats[0]
        counts = stats.inference_stats.success.count + stats.inference_stats.fail.count, stats.execution_count
        now = time.monotonic()
        if counts != last:
            last, since = counts, now
        if (counts[0] >= at_least and now - since >= settle) or now > deadline:
            return counts
        time.sleep(0.05)
