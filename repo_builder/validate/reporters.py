"""Turn a ``Report`` into text for people, JSON for tools, GitHub workflow annotations, or JUnit XML.

Reporters only format: the verdict and the exit code come from the report alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repo_builder.validate.records import Diagnostic, Severity
from repo_builder.validate.report import ModelSummary, Report

FORMATS = ("text", "json", "github", "junit")
_REPOSITORY = "(repository)"
MAX_CLEAN_LISTED = 50  # text output lists clean models one per line up to this many


def clean(text: str | None) -> str:
    """Printable text: undecodable bytes in names (surrogate escapes) become ``\\xNN``."""
    if text is None:
        return ""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _location(report: Report) -> str:
    return clean(report.repository.location or str(report.repository.root))


def _where(d: Diagnostic) -> str:
    where = clean(d.path)
    if d.line is not None:
        where += f":{d.line}"
        if d.column is not None:
            where += f":{d.column}"
    return where


def _grouped(report: Report) -> list[tuple[str, ModelSummary | None, list[Diagnostic]]]:
    """Models in repository order with their diagnostics; repository-level ones first."""
    by_model: dict[str | None, list[Diagnostic]] = {}
    for d in report.diagnostics:
        by_model.setdefault(d.model, []).append(d)
    groups: list[tuple[str, ModelSummary | None, list[Diagnostic]]] = []
    if None in by_model:
        groups.append((_REPOSITORY, None, by_model[None]))
    known = set()
    for m in report.models:
        known.add(m.name)
        groups.append((m.name, m, by_model.get(m.name, [])))
    for name, ds in by_model.items():
        if name is not None and name not in known:
            groups.append((name, None, ds))
    return groups


def _summary_line(report: Report) -> str:
    failed = sum(1 for m in report.models if not m.ok)
    counts = [
        f"{report.count(Severity.ERROR)} error(s)",
        f"{report.count(Severity.WARNING)} warning(s)",
        f"{report.count(Severity.INFO)} info",
    ]
    verdict = "OK" if report.ok else "FAILED"
    return (
        f"{verdict}: {len(report.models)} model(s), {len(report.models) - failed} ok, {failed} refused; "
        + ", ".join(counts)
    )


def render_text(report: Report, color: bool = False) -> str:
    """Grouped per model: a status line per model, then code, severity, path[:line:col], message, hint."""

    def style(text: str, **kw: Any) -> str:
        if not color:
            return text
        import click

        return click.style(text, **kw)

    colors = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "blue"}
    lines = [f"repository {_location(report)}"]
    groups = _grouped(report)
    clean_count = sum(1 for _, summary, ds in groups if not ds and summary is not None and summary.live is None)
    collapse = clean_count > MAX_CLEAN_LISTED  # a big clean repository: name only the models with findings
    for name, summary, ds in groups:
        if collapse and not ds and summary is not None and summary.live is None:
            continue
        if summary is not None:
            status = style("ok", fg="green") if summary.ok else style("refused", fg="red", bold=True)
            versions = ",".join(str(v) for v in summary.versions) or "-"
            platform = clean(summary.platform) or "-"
            head = f"{clean(name)}  {status}  versions: {versions}  platform: {platform}"
            if summary.live is not None:
                live = "loaded" if summary.live.loaded else f"not loaded: {clean(summary.live.reason)}"
                head += f"  live: {live}"
        else:
            head = clean(name)
        lines.append("")
        lines.append(style(head, bold=True) if color else head)
        for d in ds:
            sev = style(f"{d.severity.value:<7}", fg=colors[d.severity])
            lines.append(f"  {sev} {d.code} {d.rule}  {_where(d)}")
            lines.append(f"          {clean(d.message)}")
            if d.hint:
                lines.append(f"          hint: {clean(d.hint)}")
    if collapse:
        lines.append("")
        lines.append(f"{clean_count} more model(s) without findings")
    lines.append("")
    lines.append(_summary_line(report))
    return "\n".join(lines) + "\n"


def _diagnostic_json(d: Diagnostic) -> dict[str, Any]:
    return {
        "code": d.code,
        "rule": d.rule,
        "severity": d.severity.value,
        "model": clean(d.model) if d.model is not None else None,
        "version": d.version,
        "path": clean(d.path),
        "message": clean(d.message),
        "hint": clean(d.hint) if d.hint is not None else None,
        "line": d.line,
        "column": d.column,
    }


def _model_json(m: ModelSummary) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": clean(m.name),
        "ok": m.ok,
        "versions": list(m.versions),
        "platform": clean(m.platform) if m.platform is not None else None,
    }
    if m.live is not None:
        out["live"] = {"loaded": m.live.loaded, "reason": m.live.reason, "inferred": m.live.inferred}
    return out


def report_to_dict(report: Report) -> dict[str, Any]:
    """The JSON document: repository, ok, models, diagnostics (plus summary counts)."""
    return {
        "repository": _location(report),
        "ok": report.ok,
        "models": [_model_json(m) for m in report.models],
        "diagnostics": [_diagnostic_json(d) for d in report.diagnostics],
        "summary": {
            "models": len(report.models),
            "refused": sum(1 for m in report.models if not m.ok),
            "errors": report.count(Severity.ERROR),
            "warnings": report.count(Severity.WARNING),
            "info": report.count(Severity.INFO),
        },
    }


def render_json(report: Report) -> str:
    return json.dumps(report_to_dict(report), indent=2) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _annotation_file(report: Report, d: Diagnostic) -> str:
    location = report.repository.location or str(report.repository.root)
    if "://" in location:
        return f"{location.rstrip('/')}/{clean(d.path)}"
    path = Path(location) / d.path
    try:
        return clean(os.path.relpath(path))
    except ValueError:  # another drive on Windows
        return clean(str(path))


def render_github(report: Report) -> str:
    """GitHub Actions workflow commands: one ``::error``/``::warning``/``::notice`` line per diagnostic."""
    levels = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
    lines = []
    for d in report.diagnostics:
        props = [f"file={_escape_property(_annotation_file(report, d))}"]
        if d.line is not None:
            props.append(f"line={d.line}")
            if d.column is not None:
                props.append(f"col={d.column}")
        props.append(f"title={_escape_property(f'{d.code} {d.rule}')}")
        text = clean(d.message)
        if d.model is not None:
            text = f"[{clean(d.model)}] {text}"
        if d.hint:
            text += f"\nhint: {clean(d.hint)}"
        lines.append(f"::{levels[d.severity]} {','.join(props)}::{_escape_data(text)}")
    lines.append(_summary_line(report))
    return "\n".join(lines) + "\n"


def render_junit(report: Report) -> str:
    """JUnit XML: one test case per model; its errors are the failure, warnings and info go to system-out."""
    import re
    import xml.etree.ElementTree as ET

    invalid = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

    def xml(text: str | None) -> str:  # XML 1.0 cannot carry control characters at all
        return invalid.sub("\ufffd", clean(text))

    location = xml(report.repository.location or str(report.repository.root))
    groups = _grouped(report)
    failures = sum(1 for _, _, ds in groups if any(d.severity == Severity.ERROR for d in ds))
    suites = ET.Element("testsuites", name="repo-builder validate", tests=str(len(groups)), failures=str(failures))
    suite = ET.SubElement(
        suites, "testsuite", name=location, tests=str(len(groups)), failures=str(failures), errors="0", skipped="0"
    )

    def block(d: Diagnostic) -> str:
        text = f"{d.severity.value} {d.code} {d.rule} {xml(_where(d))}: {xml(d.message)}"
        return text + (f"\n  hint: {xml(d.hint)}" if d.hint else "")

    for name, _summary, ds in groups:
        case = ET.SubElement(suite, "testcase", classname=location, name=xml(name))
        errors = [d for d in ds if d.severity == Severity.ERROR]
        others = [d for d in ds if d.severity != Severity.ERROR]
        if errors:
            failure = ET.SubElement(case, "failure", type=errors[0].code, message=xml(errors[0].message))
            failure.text = "\n".join(block(d) for d in errors)
        if others:
            ET.SubElement(case, "system-out").text = "\n".join(block(d) for d in others)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


_RENDERERS: dict[str, Callable[[Report], str]] = {
    "json": render_json,
    "github": render_github,
    "junit": render_junit,
}


def render_report(report: Report, fmt: str, color: bool = False) -> str:
    """Render ``report`` as ``text``, ``json``, ``github`` or ``junit`` (``color`` only affects text)."""
    if fmt == "text":
        return render_text(report, color=color)
    try:
        return _RENDERERS[fmt](report)
    except KeyError:
        from repo_builder.errors import UserError

        raise UserError(f"unknown report format '{fmt}' (choose one of: {', '.join(FORMATS)})") from None
