"""``validate s3://`` as a CI gate (issue 38 item 7a): against an endpoint that accepts connections and
never answers, the default run ends in exit 3 within a minute; ``--timeout`` gives more; the per-request
timeouts follow it so a hung request is tried again before the deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from support.publish_helpers import CREDENTIALS
from support.silent_server import silent_server

from repo_builder.cli.validate import VALIDATE_STORE_TIMEOUT
from repo_builder.store.deadline import READ_TIMEOUT, request_timeouts, store_deadline
from repo_builder.store.s3 import filesystem_options
from repo_builder.store.urls import parse_store_url


def _validate(endpoint: str, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | CREDENTIALS
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "repo_builder", "validate", "s3://bucket/prefix", "--endpoint-url", endpoint, *args],
        capture_output=True, text=True, env=env, check=False, timeout=180,
    )
    return done, time.monotonic() - started


def test_request_timeouts_shrink_with_timeout_when_it_is_short() -> None:
    with store_deadline(VALIDATE_STORE_TIMEOUT):
        connect, read = request_timeouts()
        config = filesystem_options(parse_store_url("s3://b/p", "http://h:9"))["config_kwargs"]
    assert read == VALIDATE_STORE_TIMEOUT / 3 and connect <= read
    assert (config["connect_timeout"], config["read_timeout"]) == (connect, read)
    with store_deadline(900):
        assert request_timeouts()[1] == READ_TIMEOUT  # publish's long budget keeps botocore's usual read timeout


def test_validate_timeout_default_is_a_gates_budget_when_not_given() -> None:
    """The default, read from the command itself (the full-mode test below waits it out for real)."""
    import click

    from repo_builder.cli.validate import command

    option = next(p for p in command.params if isinstance(p, click.Option) and "--timeout" in p.opts)
    assert option.default == VALIDATE_STORE_TIMEOUT and VALIDATE_STORE_TIMEOUT <= 45


@pytest.mark.slow
@pytest.mark.full_only("the --timeout 4 run below and the default read from the command above")
def test_validate_exits_3_within_a_minute_by_default_when_endpoint_never_answers() -> None:
    pytest.importorskip("s3fs", reason="the remote extra is not installed")
    with silent_server() as (endpoint, held):
        done, elapsed = _validate(endpoint)
        accepted = len(held)
    assert done.returncode == 3, done.stderr
    assert elapsed < 60, elapsed
    assert f"did not finish within {VALIDATE_STORE_TIMEOUT:g} s (--timeout)" in done.stderr
    assert accepted >= 2  # a hung request was tried again inside the budget (read timeout = a third of it)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_validate_waits_as_long_as_timeout_says_when_given() -> None:
    pytest.importorskip("s3fs", reason="the remote extra is not installed")
    with silent_server() as (endpoint, _):
        done, elapsed = _validate(endpoint, "--timeout", "4")
    assert done.returncode == 3 and "within 4 s (--timeout)" in done.stderr, done.stderr
    assert 4 <= elapsed < 4 + 10, elapsed
