"""Reporters: text, json, github annotations and junit render the same report faithfully."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from validate_repo_helpers import ADD_SUB_MODEL_PY, make_add_sub, make_model, validate

from repo_builder.errors import UserError
from repo_builder.validate.records import Severity
from repo_builder.validate.report import LiveResult, Report
from repo_builder.validate.reporters import render_report


@pytest.fixture
def report(repo: Path) -> Report:
    make_add_sub(repo)
    make_model(repo, "broken", 'backend: "python"\n', {"01": {"model.py": ADD_SUB_MODEL_PY}})
    make_model(repo, "syntax", 'backend: "python"\n', {1: {"model.py": "def f(:\n"}})
    return validate(repo)


def test_render_text_groups_diagnostics_per_model_with_hint_and_summary(report: Report) -> None:
    text = render_report(report, "text")
    lines = text.splitlines()
    broken = lines.index(next(line for line in lines if line.startswith("broken ")))
    syntax = lines.index(next(line for line in lines if line.startswith("syntax ")))
    block = "\n".join(lines[broken:syntax])
    assert "refused" in lines[broken]
    assert "warning RB107 version-folder-ignored  broken/01" in block
    assert "error   RB110 no-version-available  broken" in block
    assert "hint: " in block
    assert "syntax/1/model.py:1:" in text  # path:line:col
    assert lines[-1].startswith("FAILED: 3 model(s), 1 ok, 2 refused; ")
    assert "\x1b[" not in text  # no colour unless asked


def test_render_text_colours_only_when_asked(report: Report) -> None:
    assert "\x1b[" in render_report(report, "text", color=True)


def test_render_json_has_the_documented_shape(report: Report) -> None:
    doc = json.loads(render_report(report, "json"))
    assert set(doc) >= {"repository", "ok", "models", "diagnostics"}
    assert doc["ok"] is False and doc["repository"] == report.repository.location
    models = {m["name"]: m for m in doc["models"]}
    assert models["add_sub"] == {"name": "add_sub", "ok": True, "versions": [1], "platform": "python"}
    assert models["broken"]["ok"] is False and models["broken"]["versions"] == []
    for d in doc["diagnostics"]:
        assert set(d) >= {"code", "rule", "severity", "model", "version", "path", "message", "hint", "line", "column"}
        assert d["severity"] in ("error", "warning", "info")
        assert isinstance(d["message"], str) and isinstance(d["path"], str)
    syntax = next(d for d in doc["diagnostics"] if d["model"] == "syntax")
    assert (syntax["code"], syntax["version"], syntax["line"]) == ("RB407", 1, 1)
    assert doc["summary"]["errors"] == report.count(Severity.ERROR)


def test_render_json_includes_live_result_when_set(report: Report) -> None:
    live = LiveResult(loaded=False, reason="failed to load 'broken'")
    models = tuple(replace(m, live=live) if m.name == "broken" else m for m in report.models)
    doc = json.loads(render_report(replace(report, models=models), "json"))
    by_name = {m["name"]: m for m in doc["models"]}
    assert by_name["broken"]["live"] == {"loaded": False, "reason": "failed to load 'broken'", "inferred": None}
    assert "live" not in by_name["add_sub"]


def test_render_github_writes_one_escaped_annotation_per_diagnostic(report: Report) -> None:
    lines = render_report(report, "github").splitlines()
    annotations = [line for line in lines if line.startswith("::")]
    assert len(annotations) == len(report.diagnostics)
    syntax = next(a for a in annotations if "RB407" in a)
    assert syntax.startswith("::error file=")
    assert ",line=1,col=" in syntax and "title=RB407 python-model-invalid::" in syntax
    assert "%0Ahint: " in syntax and "\n" not in syntax
    warning = next(a for a in annotations if "RB107" in a)
    assert warning.startswith("::warning file=") and warning.split("::")[1].split(",")[0].endswith("broken/01")


def test_render_junit_has_one_testcase_per_model_and_failures_for_errors(report: Report) -> None:
    root = ET.fromstring(render_report(report, "junit"))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {"add_sub", "broken", "syntax"}
    assert cases["add_sub"].find("failure") is None
    failure = cases["broken"].find("failure")
    assert failure is not None and failure.get("type") == "RB110"
    assert "RB107" in (cases["broken"].findtext("system-out") or "")
    assert root.get("failures") == "2"


def test_render_report_survives_non_utf8_names_and_control_characters(repo: Path) -> None:
    name = os.fsdecode(b"bad\xff")
    make_model(repo, name, 'backend: "python"\nname: "x\\001y"\n', {1: {"model.py": ADD_SUB_MODEL_PY}})
    report = validate(repo)
    assert report.diagnostics
    for fmt in ("text", "json", "github", "junit"):
        out = render_report(report, fmt)
        out.encode("utf-8")  # printable: no lone surrogates
        assert "bad\\xff" in (json.loads(out)["models"][0]["name"] if fmt == "json" else out)
    ET.fromstring(render_report(report, "junit"))  # well-formed despite \x01 in a message


def test_render_report_rejects_unknown_format(report: Report) -> None:
    with pytest.raises(UserError, match="unknown report format 'xml'"):
        render_report(report, "xml")


def test_render_text_collapses_clean_models_when_repository_is_big(repo: Path) -> None:
    from repo_builder.validate.reporters import MAX_CLEAN_LISTED

    for i in range(MAX_CLEAN_LISTED + 1):
        make_add_sub(repo, f"m{i:03d}")
    make_model(repo, "broken", 'backend: "python"\n', {1: {}})
    text = render_report(validate(repo), "text")
    assert f"{MAX_CLEAN_LISTED + 1} more model(s) without findings" in text
    assert "\nbroken  refused" in text and "\nm000 " not in text
