"""The report for tools: one JSON document with a ``schema_version``; ``report.schema.json`` beside this
module (shipped in the wheel) describes it, and a test holds every document against it."""

from __future__ import annotations

import json
from typing import Any

from repo_builder import __version__
from repo_builder.validate.records import Diagnostic, Severity
from repo_builder.validate.report import ModelSummary, Report
from repo_builder.validate.reporters.formatting import (
    RenderSettings,
    exact,
    image_json,
    live_json,
    location,
    target_text,
    verdict_ok,
)
from repo_builder.validate.suppress import acknowledged_refusals

# Bumped on any change a consumer could trip on (a field removed, renamed or retyped); new fields are not.
SCHEMA_VERSION = 1
SCHEMA_FILE = "report.schema.json"


def report_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the document ``render_json`` writes."""
    from importlib import resources  # stdlib, but ~7 ms at start-up: only the schema needs it

    text = resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)  # the file is a JSON object
    return schema


def _diagnostic_json(d: Diagnostic) -> dict[str, Any]:
    out: dict[str, Any] = {
        "code": d.code,
        "rule": d.rule,
        "severity": d.severity.value,
        "model": exact(d.model) if d.model is not None else None,
        "version": d.version,
        "path": exact(d.path),
        "message": exact(d.message),
        "hint": exact(d.hint) if d.hint is not None else None,
        "line": d.line,
        "column": d.column,
    }
    if d.suppression is not None:
        s = d.suppression
        out["suppression"] = {"kind": s.kind, "reason": s.reason, "by": s.by, "source": s.source}
    return out


def _model_json(m: ModelSummary) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": exact(m.name),
        "ok": m.ok,
        "versions": list(m.versions),
        "platform": exact(m.platform) if m.platform is not None else None,
    }
    live = live_json(m)
    if live is not None:
        out["live"] = live
    return out


def report_to_dict(report: Report, settings: RenderSettings | None = None) -> dict[str, Any]:
    """The JSON document. ``ok`` is the verdict under ``fail_on`` (the exit code's), ``target`` what the
    repository was judged for (null when the report does not say), ``image`` which image Python steps were
    judged in (absent when the report does not say)."""
    settings = settings or RenderSettings()
    document: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "repo-builder", "version": __version__},
        "repository": location(report),
        "target": target_text(report),
        "ok": verdict_ok(report, settings.fail_on),
        "fail_on": settings.fail_on.value,
        "models": [_model_json(m) for m in report.models],
        "diagnostics": [_diagnostic_json(d) for d in report.diagnostics],
        "suppressed": [_diagnostic_json(d) for d in report.suppressed],
        "summary": {
            "models": len(report.models),
            "refused": sum(1 for m in report.models if not m.ok),
            "errors": report.count(Severity.ERROR),
            "warnings": report.count(Severity.WARNING),
            "info": report.count(Severity.INFO),
            "suppressed": len(report.suppressed),
            "acknowledged_refusals": [exact(name) for name in acknowledged_refusals(report)],
        },
    }
    image = image_json(report)
    if image is not None:
        document["image"] = image
    return document


def render_json(report: Report, settings: RenderSettings | None = None) -> str:
    return json.dumps(report_to_dict(report, settings), indent=2) + "\n"
