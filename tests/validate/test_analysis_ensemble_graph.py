"""analysis/ensemble_graph.py and ensemble_tensors.py: an ensemble's stages, on their own."""

from __future__ import annotations

from pathlib import Path

from support.rule_repo_helpers import identity_model, write_model

from repo_builder.validate.analysis.ensemble_graph import (
    data_flow_problems,
    member_names,
    scheduling_problems,
)
from repo_builder.validate.analysis.ensemble_tensors import analyze_tensors
from repo_builder.validate.records import RuleContext, ValidateOptions
from repo_builder.validate.scan import scan_repository

IO = 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
STEP = 'ensemble_scheduling { step [ { model_name: "member" model_version: -1 input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "OUT" } } ] }\n'


def _ensemble(repo: Path, body: str, member_io: str = IO) -> tuple[object, RuleContext]:
    identity_model(repo, "member", member_io)
    write_model(repo, "e", f'name: "e"\nplatform: "ensemble"\n{IO}{body}', {"1/.keep": ""})
    scanned = scan_repository(repo)
    return scanned.model("e"), RuleContext(scanned, ValidateOptions())


def test_scheduling_problems_empty_for_wired_ensemble(repo: Path) -> None:
    model, _ = _ensemble(repo, STEP)
    assert scheduling_problems(model) == [] and data_flow_problems(model) == []
    assert member_names(model) == ("member",)


def test_data_flow_problems_name_unused_input(repo: Path) -> None:
    model, _ = _ensemble(repo, STEP.replace('value: "IN"', 'value: "OTHER"'))
    assert any("ensemble input 'IN'" in p for p in data_flow_problems(model))


def test_analyze_tensors_finds_type_mismatch(repo: Path) -> None:
    model, ctx = _ensemble(repo, STEP)
    assert analyze_tensors(model, ctx) == []
    model, ctx = _ensemble(repo, STEP, IO.replace("TYPE_FP32", "TYPE_INT32"))
    assert any("inconsistent data type" in g.finding.message for g in analyze_tensors(model, ctx))
