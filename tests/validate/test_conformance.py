"""Triton's own qa/L0_model_config cases (shared/conformance/triton-qa) through our validator.

Each failing case an offline validator can decide must be refused on the case's model; in aggregate
at least 95% are flagged and at least 80% carry the server's own message text (issue 2). Success cases
whose files the suite carries must come out clean.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from repo_builder.validate.conformance import (
    DECIDABLE_GROUPS,
    CaseResult,
    CaseRun,
    bre_to_regex,
    case_runs,
    find_suite,
    load_cases,
    materialize_case,
    not_decidable_reason,
    run_case,
    summarize,
)

SUITE = find_suite(Path(__file__))  # from the checkout, even when the package is installed elsewhere
pytestmark = pytest.mark.skipif(
    SUITE is None, reason="shared/conformance/triton-qa not found (set REPO_BUILDER_CONFORMANCE)"
)

# Known gaps, each owned by a rule outside this file's scope (see the lead's integration notes).
KNOWN_SUCCESS_GAPS = {
    "autofill_noplatform_success/custom/empty_config.identity": "RB405 asks for model.identity, which the identity backend never reads",
    "autofill_noplatform_success/custom/no_backend.identity": "RB405 asks for model.identity, which the identity backend never reads",
}


def _runs(outcome: str) -> list[CaseRun]:
    if SUITE is None:
        return []
    cases = [c for c in load_cases(SUITE) if c.outcome == outcome and not_decidable_reason(c) is None]
    return [run for case in cases for run in case_runs(case)]


@cache
def _result(run: CaseRun) -> CaseResult:
    return run_case(run)


FAILING = _runs("fail")
SUCCEEDING = _runs("success")


@pytest.mark.parametrize("run", FAILING, ids=[r.id for r in FAILING])
def test_conformance_case_is_refused_when_triton_refuses_it(run: CaseRun) -> None:
    result = _result(run)
    assert result.flagged, (
        f"no error on '{run.case.model}'; ours: {result.messages}; Triton: {run.case.expected}"
    )


@pytest.mark.parametrize("run", SUCCEEDING, ids=[r.id for r in SUCCEEDING])
def test_conformance_case_is_clean_when_triton_loads_it(run: CaseRun) -> None:
    result = _result(run)
    if result.flagged and run.case.name in KNOWN_SUCCESS_GAPS:
        pytest.xfail(KNOWN_SUCCESS_GAPS[run.case.name])
    assert not result.flagged, result.messages


def test_conformance_rates_meet_issue_thresholds_when_all_decidable_cases_run() -> None:
    results = [_result(run) for run in FAILING if run.case.group in DECIDABLE_GROUPS]  # the issue's set
    flagged = sum(r.flagged for r in results) / len(results)
    matched = sum(r.matched for r in results) / len(results)
    assert len(results) >= 200  # 58 cases x 3 platforms + the autofill groups: the suite really ran
    assert flagged >= 0.95, f"{flagged:.1%} flagged"
    assert matched >= 0.80, (
        f"{matched:.1%} carry Triton's text; misses: {[r.run.id for r in results if not r.matched]}"
    )
    labels = {rate.label for rate in summarize(results)}
    assert {"noautofill_platform [tensorrt_plan]", "autofill_noplatform/ensemble"} <= labels


def test_conformance_marks_python_cases_not_decidable_when_only_a_server_can_run_them() -> None:
    cases = [c for c in load_cases(SUITE) if c.group == "autofill_noplatform/python"]
    assert cases
    result = run_case(case_runs(cases[0])[0])
    assert not result.decidable and not result.flagged and "auto_complete_config" in (result.reason or "")


def test_materialize_case_swaps_platform_and_adds_version_folder_when_noautofill(tmp_path: Path) -> None:
    case = next(c for c in load_cases(SUITE) if c.name == "noautofill_platform/negative_max_batch_size")
    run = next(r for r in case_runs(case) if r.platform == "pytorch_libtorch")
    root = materialize_case(run, tmp_path / "models")
    config = (root / case.model / "config.pbtxt").read_text()
    assert config.count("platform:") == 1 and 'platform: "pytorch_libtorch"' in config
    assert (root / case.model / "1").is_dir()
    assert not list(root.rglob("expected*"))


def test_bre_to_regex_matches_literal_brackets_when_escaped() -> None:
    pattern = bre_to_regex(r"default priority level must be in range \[1, 3\] for m")
    assert pattern.search("x: default priority level must be in range [1, 3] for m")
    assert not pattern.search("default priority level must be in range 1, 3 for m")
