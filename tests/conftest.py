"""Suite-wide settings, applied before any test module imports gRPC."""

from __future__ import annotations

import os

# gRPC's fork handlers can deadlock a fork() made while its threads are busy; the tests fork helpers
# (servers, CLI subprocesses) from a process that also holds gRPC clients.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


# --- Leftovers (issue 26): the suite leaves no folders in the temporary directory. -------------------
# Other engineers' runs share /tmp, so the check is private to this session: every temporary folder made
# by this process and its children (servers' workdirs, live stages, S3 mirrors) lands in a fresh folder;
# after the last fixture is torn down the session fails if anything but pytest's own tmp_path tree is left,
# naming the test that left it. The folder is removed when the session passes.
import shutil
import tempfile

import pytest
from support.publish_helpers import bucket, s3_client, s3_server

# With pytest-xdist (scripts/test runs workers) each worker has its own folder beside the controller's, not
# inside it: the controller would count a worker's folder as a leftover, and nesting lengthens every path
# (AF_UNIX socket names stop at 108 bytes).
_ROOT_TMP = os.environ.setdefault("REPO_BUILDER_TESTS_ROOT_TMP", tempfile.gettempdir())
SESSION_TMP = tempfile.mkdtemp(prefix="repo-builder-tests-", dir=_ROOT_TMP)
os.environ["TMPDIR"] = SESSION_TMP
tempfile.tempdir = SESSION_TMP
_left_by: dict[str, str] = {}  # folder name -> the first test after which it existed


# Not ours, kept on purpose by their owners (removed with the folder when the session passes): pytest's
# tmp_path tree, onnxruntime's session-id file (see test_signals.py), torch's compile cache.
_NOT_OURS = ("pytest-of-", ".ses", "torchinductor_")


def _leftovers() -> set[str]:
    try:
        return {n for n in os.listdir(SESSION_TMP) if not n.startswith(_NOT_OURS)}
    except OSError:
        return set()


@pytest.fixture(autouse=True)
def _note_leftovers(request: pytest.FixtureRequest):
    before = _leftovers()
    yield
    for name in _leftovers() - before:
        _left_by.setdefault(name, request.node.nodeid)


@pytest.hookimpl(trylast=True)  # after the runner has torn down session-scoped fixtures (servers)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left = sorted(_leftovers())
    if left:
        lines = [f"  {SESSION_TMP}/{n} (left after {_left_by.get(n, 'a fixture or the session')})" for n in left]
        print("\nerror: the tests left folders in the temporary directory:\n" + "\n".join(lines))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif exitstatus == 0:
        shutil.rmtree(SESSION_TMP, ignore_errors=True)


# --- Shared fixtures: moto's S3 server on loopback and a fresh bucket per test (tests/support/publish_helpers.py),
# used by the repository (publish, pull) and store tests. Helpers shared by several folders live in tests/support/.
__all__ = ["bucket", "s3_client", "s3_server"]


# Long runs whose quicker equivalent CI runs instead (the guide: CI stays under 30 minutes; the full mode is
# for a machine with time, e.g. before updating BENCHMARKS.md): REPO_BUILDER_FULL_TESTS=1 runs them too.
FULL_TESTS = os.environ.get("REPO_BUILDER_FULL_TESTS") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _slow_modules_first(items)
    if FULL_TESTS:
        return
    for item in items:
        marker = item.get_closest_marker("full_only")
        if marker is not None:
            item.add_marker(pytest.mark.skip(reason=f"full mode only (REPO_BUILDER_FULL_TESTS=1); CI runs {marker.args[0]}"))


def _slow_modules_first(items: list[pytest.Item]) -> None:
    """Modules holding a test marked slow run first (the benchmark scripts' quick runs in tests/scripts/, the
    longest, before them), each module's tests kept together and in order: with xdist's --dist loadfile
    (scripts/test) a long module picked up last would leave the other workers idle at the end. The order is
    deterministic, as xdist requires of every worker's collection."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    position = {id(item): n for n, item in enumerate(items)}

    def rank(item: pytest.Item) -> tuple[int, int]:
        if item.path not in slow:
            return 2, position[id(item)]
        return (0 if item.path.parent.name == "scripts" else 1), position[id(item)]

    items.sort(key=rank)
