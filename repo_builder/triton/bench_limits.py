"""How many closed-loop clients ``bench`` can run on this machine, and progress for the levels that take a while.

Each client is a Python thread with its own gRPC channel: a few open files each, a thread stack, and a
share of one interpreter lock. Past the limit the run either fails on "too many open files" after
minutes of connecting, or measures the client's thread switching instead of the server.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from repo_builder.errors import UserError

FILES_PER_CLIENT = 8  # a gRPC channel's socket, its completion-queue and wake-up descriptors, with margin
RESERVED_FILES = 256  # the server's log, its own connections, Python's files
CLIENTS_PER_CORE = 256  # threads beyond this per core measure the GIL, not the server
PROGRESS_FROM = 64  # clients: from this level on, starting them and the window show progress


@dataclass(frozen=True)
class ClientLimit:
    clients: int
    why: str


def client_limit(open_files: int | None = None, cores: int | None = None) -> ClientLimit:
    """The most clients this machine can run, and what bounds it (open files or cores)."""
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        open_files = open_files if open_files != resource.RLIM_INFINITY else 1 << 20
    cores = cores or os.cpu_count() or 1
    by_files = max(1, (open_files - RESERVED_FILES) // FILES_PER_CLIENT)
    by_cores = CLIENTS_PER_CORE * cores
    if by_files < by_cores:
        why = (f"each client is a thread with its own gRPC connection (about {FILES_PER_CLIENT} open files) and "
               f"the open-files limit is {open_files} (ulimit -n)")
        return ClientLimit(by_files, why)
    why = (f"each client is a Python thread; past {CLIENTS_PER_CORE} per core ({cores} cores here) they measure "
           "their own thread switching, not the server")
    return ClientLimit(by_cores, why)


def check_concurrency(levels: Sequence[int], limit: ClientLimit | None = None) -> None:
    """Refuse at once a level beyond what the machine can run, saying the limit and why."""
    limit = limit or client_limit()
    too_many = [level for level in levels if level > limit.clients]
    if too_many:
        raise UserError(
            f"--concurrency {max(too_many)}: this machine can run at most {limit.clients} clients: {limit.why}; "
            "use a lower level, or run several bench processes on more machines"
        )


def start_progress(concurrency: int, log: Callable[[str], None] | None) -> Callable[[int], None]:
    """A callback for each client started; it logs every ``PROGRESS_FROM`` clients on big levels."""

    def started(count: int) -> None:
        if log is not None and concurrency >= PROGRESS_FROM and (count % PROGRESS_FROM == 0 or count == concurrency):
            log(f"  started {count}/{concurrency} clients")

    return started
