"""SARIF 2.1.0 for GitHub code scanning (``github/codeql-action/upload-sarif``) and other SARIF viewers.

The rules listed are the whole registry (offline rules, the object store's codes and the live codes), each with its documentation,
so a viewer can explain a code it has never seen; file paths are relative to the checkout
(``$GITHUB_WORKSPACE``), as code scanning requires.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from repo_builder import __version__
from repo_builder.store.urls import is_remote
from repo_builder.validate.live_codes import LIVE_CODES
from repo_builder.validate.records import Diagnostic, Severity
from repo_builder.validate.remote import STORE_CODES
from repo_builder.validate.report import Report
from repo_builder.validate.reporters.formatting import RenderSettings, exact, workspace_path
from repo_builder.validate.rules import RULES

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _rule(code: str, name: str, severity: Severity, doc: str) -> dict[str, Any]:
    first = doc.strip().split("\n\n")[0].replace("\n", " ").strip() or name
    return {
        "id": code,
        "name": name,
        "shortDescription": {"text": first},
        "fullDescription": {"text": doc.strip() or name},
        "help": {"text": doc.strip() or name},
        "defaultConfiguration": {"level": _LEVELS[severity]},
    }


def registry_rules() -> list[dict[str, Any]]:
    """Every code validate can report, in registry order: offline rules, the store's, ``--live`` codes."""
    rules = [_rule(r.code, r.name, r.severity, r.doc) for r in RULES]
    rules += [_rule(c.code, c.rule, c.severity, c.doc) for c in STORE_CODES]
    rules += [_rule(c.code, c.rule, c.severity, c.doc) for c in LIVE_CODES]
    return rules


def _uri(path: str) -> str:
    return path if is_remote(path) else quote(path, safe="/")


def _result(report: Report, d: Diagnostic, index: int, settings: RenderSettings) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(workspace_path(report, d, settings.workspace, exact))}}
    if d.line is not None and d.line >= 1:
        region: dict[str, Any] = {"startLine": d.line}
        if d.column is not None and d.column >= 1:
            region["startColumn"] = d.column
        physical["region"] = region
    message = exact(d.message) + (f"\nhint: {exact(d.hint)}" if d.hint else "")
    result: dict[str, Any] = {
        "ruleId": d.code,
        "ruleIndex": index,
        "level": _LEVELS[d.severity],
        "message": {"text": message},
        "locations": [{"physicalLocation": physical}],
        "properties": {"model": exact(d.model) if d.model is not None else None, "version": d.version},
    }
    if d.model is not None:
        result["locations"][0]["logicalLocations"] = [{"name": exact(d.model), "kind": "module"}]
    if d.suppression is not None:  # listed, so code scanning shows it as dismissed rather than losing it
        kind = "inSource" if d.suppression.kind == "inline" else "external"
        entry: dict[str, Any] = {"kind": kind, "status": "accepted"}
        if d.suppression.reason:
            entry["justification"] = exact(d.suppression.reason)
        result["suppressions"] = [entry]
    return result


def report_to_sarif(report: Report, settings: RenderSettings | None = None) -> dict[str, Any]:
    settings = settings or RenderSettings()
    rules = registry_rules()
    index = {r["id"]: i for i, r in enumerate(rules)}
    every = report.diagnostics + report.suppressed
    for d in every:  # a code the registry does not list (should not happen): describe it anyway
        if d.code not in index:
            index[d.code] = len(rules)
            rules.append(_rule(d.code, d.rule, d.severity, d.rule))
    driver = {"name": "repo-builder", "version": __version__, "semanticVersion": __version__, "rules": rules}
    run = {
        "tool": {"driver": driver},
        "results": [_result(report, d, index[d.code], settings) for d in every],
        "columnKind": "unicodeCodePoints",
        "invocations": [{"executionSuccessful": True, "exitCode": report.exit_code(settings.fail_on)}],
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def render_sarif(report: Report, settings: RenderSettings | None = None) -> str:
    return json.dumps(report_to_sarif(report, settings), indent=2) + "\n"
