"""``validate_live`` against the real server: loads, refusals with the server's reason, the hang."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.triton_repo_factory import (
    Ensemble,
    Step,
    Tensor,
    slow_model_py,
    write_double_repository,
    write_ensemble,
    write_python_model,
)

from repo_builder.live.judge import LIVE_CODES, LiveSettings, validate_live
from repo_builder.validate.engine import check_repository, validate_repository
from repo_builder.validate.records import Severity
from repo_builder.validate.scan import scan_repository

pytestmark = pytest.mark.triton

SLOW_MODEL_PY = slow_model_py(120)


def _codes(report, model: str) -> set[str]:
    return {d.code for d in report.for_model(model)}


def test_validate_live_loads_and_infers_when_repository_is_good(tmp_path: Path) -> None:
    repo = write_double_repository(tmp_path / "repo")
    write_python_model(
        repo,
        "words",
        inputs=(Tensor("TEXT", "TYPE_STRING", (1,)),),
        outputs=(Tensor("IDS", "TYPE_INT64", (-1,)),),
        max_batch_size=4,
    )
    write_ensemble(
        repo,
        Ensemble(
            "text",
            (Tensor("T", "TYPE_STRING", (1,)),),
            (Tensor("I", "TYPE_INT64", (-1,)),),
            (Step("words", (("TEXT", "T"),), (("IDS", "I"),)),),
            max_batch_size=4,
        ),
    )
    report = validate_live(validate_repository(repo), LiveSettings(load_timeout=30))
    live = {m.name: m.live for m in report.models}
    assert all(r is not None and r.loaded for r in live.values()), live
    assert live["pipeline"].inferred is True and live["text"].inferred is True  # type: ignore[union-attr]
    assert live["double"].inferred is None  # type: ignore[union-attr]
    assert not {d.code for d in report.diagnostics} & {c.code for c in LIVE_CODES}
    assert not list(repo.rglob("__pycache__"))  # the server left the user's repository as it was


def test_validate_live_reports_server_reason_when_model_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_python_model(repo, "renamed", config='name: "other"\nbackend: "python"\n')
    write_python_model(
        repo, "nodims", config='backend: "python"\ninput [{ name: "X" data_type: TYPE_FP32 }]\n'
    )
    # No offline rules at all: every model passes offline, so each refusal is also a disagreement.
    offline = check_repository(scan_repository(repo), rules=())
    report = validate_live(offline, LiveSettings(load_timeout=30))
    live = {m.name: m.live for m in report.models}
    assert live["renamed"].loaded is False  # type: ignore[union-attr]
    # The client only hears "failed to poll"; the real reason comes from the server's log.
    assert "directory name must equal model name" in live["renamed"].reason  # type: ignore[union-attr,operator]
    assert "must specify 'dims'" in live["nodims"].reason  # type: ignore[union-attr,operator]
    refused = [d for d in report.diagnostics if d.code == "RB901"]
    assert {d.model for d in refused} == {"renamed", "nodims"}
    assert all(d.severity == Severity.ERROR and d.rule == "server-refused-model" for d in refused)
    disagreements = [d for d in report.diagnostics if d.code == "RB902"]
    assert {d.model for d in disagreements} == {"renamed", "nodims"}
    assert all("passed" in d.message and "refused" in d.message for d in disagreements)
    assert report.exit_code() == 1


def test_validate_live_reports_disagreement_when_offline_refuses_a_loadable_model(tmp_path: Path) -> None:
    repo = write_double_repository(tmp_path / "repo")
    offline = validate_repository(repo)
    assert offline.ok
    from dataclasses import replace

    # Pretend the offline checks had refused 'double': the server, which loads it, must say so.
    flipped = replace(offline, models=tuple(replace(m, ok=m.name != "double") for m in offline.models))
    report = validate_live(flipped, LiveSettings(load_timeout=30, infer=False))
    (disagreement,) = [d for d in report.diagnostics if d.code == "RB902"]
    assert disagreement.model == "double" and "but the server loaded it" in disagreement.message
    assert report.models[0].live is not None and report.models[0].live.inferred is None


def test_validate_live_reports_refusal_and_restarts_when_load_hangs_or_crashes(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_python_model(repo, "a_no_model_py", model_py=None)  # Triton 2.51 hangs on this load
    write_python_model(repo, "a_slow", model_py=SLOW_MODEL_PY)  # loads, but not within the timeout
    write_python_model(repo, "a_crash")
    (repo / "a_crash" / "config.pbtxt").unlink()
    (repo / "a_crash" / "config.pbtxt").mkdir()  # Triton 2.51 aborts (std::length_error) reading it
    write_python_model(repo, "b_fine")
    write_ensemble(
        repo,
        Ensemble(
            "c_uses_hung",
            (Tensor("X"),),
            (Tensor("Y"),),
            (Step("a_no_model_py", (("INPUT0", "X"),), (("OUTPUT0", "Y"),)),),
        ),
    )
    started = time.monotonic()
    report = validate_live(validate_repository(repo), LiveSettings(load_timeout=5))
    # The missing model.py is cut short from the log (the stub's failure is logged at once).
    assert time.monotonic() - started < 90
    live = {m.name: m.live for m in report.models}
    hung = live["a_no_model_py"]
    assert hung is not None and not hung.loaded and "load hangs" in (hung.reason or "")
    assert "restarted" in (hung.reason or "")
    assert "model file not found" in (hung.reason or "")  # the stub's own words, from the log
    slow = live["a_slow"]
    assert slow is not None and not slow.loaded and "--load-timeout 5" in (slow.reason or "")
    assert "waited" in (slow.reason or "")
    crash = live["a_crash"]
    assert crash is not None and not crash.loaded and "died while loading" in (crash.reason or "")
    assert live["b_fine"] is not None and live["b_fine"].loaded  # the restarted server went on
    ensemble = live["c_uses_hung"]
    assert ensemble is not None and not ensemble.loaded and "a_no_model_py" in (ensemble.reason or "")
    assert "RB901" in _codes(report, "a_no_model_py")
    assert _codes(report, "a_slow") == {"RB906"}  # a slow load: timed out, neither refused nor a disagreement
