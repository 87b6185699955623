"""Retries of store calls (``store/retries.py``) and what publish warns about a URL Triton cannot parse;
moved here from the publish round-trip tests."""

from __future__ import annotations

import pytest

from repo_builder.errors import ToolError, UserError
from repo_builder.store.retries import with_retries
from repo_builder.store.urls import parse_store_url


def test_with_retries_succeeds_when_failures_are_transient() -> None:
    calls, waits = [], []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionResetError("connection reset by peer")
        return "done"

    assert with_retries(flaky, "s3://b/k", attempts=4, base_delay=0.1, sleep=waits.append) == "done"
    assert len(calls) == 3 and len(waits) == 2 and waits[1] > waits[0]  # backoff grows


def test_with_retries_raises_at_once_when_object_is_missing() -> None:
    calls = []

    def missing() -> None:
        calls.append(1)
        raise FileNotFoundError("NoSuchKey")

    with pytest.raises(UserError, match="s3://b/k: not found"):
        with_retries(missing, "s3://b/k", attempts=4, sleep=lambda _: None)
    assert len(calls) == 1


def test_with_retries_raises_tool_error_when_transient_failures_persist() -> None:
    def down() -> None:
        raise ConnectionRefusedError("connection refused")

    with pytest.raises(ToolError, match="after 3 attempts"):
        with_retries(down, "s3://b/k", attempts=3, sleep=lambda _: None)


def test_store_url_names_triton_parse_problem_when_prefix_has_other_characters() -> None:
    odd = parse_store_url("s3://127.0.0.1:9000/models/team a/v+1")
    assert odd.triton_url_problem() is not None and "Triton cannot parse" in odd.triton_url_problem()
    assert parse_store_url("s3://127.0.0.1:9000/models/team_a/v-1.2").triton_url_problem() is None
    assert parse_store_url("s3://models/team a").triton_url_problem() is None  # AWS form: no such limit
