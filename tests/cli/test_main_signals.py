"""``main()`` turns SIGTERM into Ctrl-C for every command, before any command installs its own handler:
the command's cleanup runs, a second signal does not cut it short, and the exit is 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from repo_builder.cli import main as cli_main
from repo_builder.signals import interrupt_on_termination

TEST_MODULE = "repo_builder.cli._signal_test_command"


@pytest.fixture
def cleanup_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A command that gets SIGTERM mid-run, and SIGTERM again during its cleanup."""
    log: list[str] = []

    @click.command("sleepy")
    def command() -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0.1)  # let the handler run
            log.append("not interrupted")
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # a second signal while cleaning up: ignored
            signal.sigtimedwait([], 0.1)
            log.append("cleaned up")
        return 0

    module = types.ModuleType(TEST_MODULE)
    module.command = command  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, TEST_MODULE, module)
    monkeypatch.setitem(cli_main.COMMANDS, "sleepy", TEST_MODULE.rsplit(".", 1)[1])
    yield log


def test_main_exits_130_after_cleanup_when_sigterm_arrives_during_any_command(
    cleanup_log: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    assert cli_main.main(["sleepy"]) == 130
    assert cleanup_log == ["cleaned up"]
    assert capsys.readouterr().err.strip() == "interrupted"
    assert signal.getsignal(signal.SIGTERM) == before  # main() leaves the process's handlers as it found them


def test_interrupt_on_termination_keeps_outer_handler_when_nested() -> None:
    with interrupt_on_termination():
        outer = signal.getsignal(signal.SIGTERM)
        with interrupt_on_termination():
            assert signal.getsignal(signal.SIGTERM) is outer
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0.1)
        os.kill(os.getpid(), signal.SIGTERM)  # already stopping: the cleanup is not cut short
        signal.sigtimedwait([], 0.1)


LATE_SIGNAL = """
import os, signal
from repo_builder.signals import exit_with

def main() -> int:
    os.kill(os.getpid(), signal.{sig})  # lands as main returns, after any handling of its own
    return 0

exit_with(main)
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_process_exits_130_without_traceback_when_signal_lands_as_main_returns(sig: str) -> None:
    # Python's own ending for a late SIGINT is a KeyboardInterrupt traceback and death by signal (-2).
    done = subprocess.run(
        [sys.executable, "-c", LATE_SIGNAL.format(sig=sig)], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (130, "interrupted\n")


def test_console_script_and_module_enter_through_exit_with() -> None:
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert 'repo-builder = "repo_builder.cli.main:run"' in pyproject
    done = subprocess.run(
        [sys.executable, "-m", "repo_builder", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
