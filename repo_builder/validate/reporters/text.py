"""The report for people: a status line per model, then each finding (code, severity, path:line:col,
message, hint), then one summary line that agrees with the exit code."""

from __future__ import annotations

from typing import Any

from repo_builder.validate.records import Diagnostic, Severity
from repo_builder.validate.report import ModelSummary, Report
from repo_builder.validate.reporters.formatting import (
    RenderSettings,
    capped,
    clean,
    format_diagnostic_block,
    grouped,
    hidden_line,
    image_text,
    line_start,
    location,
    summary_line,
    target_text,
)

MAX_CLEAN_LISTED = 50  # text output lists clean models one per line up to this many
_COLORS = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "blue"}


def _style(settings: RenderSettings, text: str, **kw: Any) -> str:
    if not settings.color:
        return text
    import click  # light, and only needed on a terminal

    return click.style(text, **kw)


def _head(name: str, summary: ModelSummary | None, settings: RenderSettings) -> str:
    if summary is None:
        return clean(name)
    ok = summary.ok
    status = _style(settings, "ok", fg="green") if ok else _style(settings, "refused", fg="red", bold=True)
    versions = ",".join(str(v) for v in summary.versions) or "-"
    head = f"{clean(name)}  {status}  versions: {versions}  platform: {clean(summary.platform) or '-'}"
    if summary.live is not None:
        live = summary.live
        via = " (through the ONNX Runtime stand-in)" if live.proven_by == "stand-in" else ""
        why = f": {clean(live.reason)}" if not live.loaded and live.reason else ""
        head += f"  live: {live.status_text}{via}{why}"
    return _style(settings, head, bold=True) if settings.color else head


def _shown(ds: list[Diagnostic], settings: RenderSettings) -> list[Diagnostic]:
    return [d for d in ds if d.severity != Severity.INFO] if settings.quiet else ds


def render_text(report: Report, settings: RenderSettings | None = None) -> str:
    """Grouped per model; big clean repositories name only the models with findings (all with verbose);
    quiet shows only models with warnings or errors."""
    settings = settings or RenderSettings()
    lines = [f"repository {location(report)}  (target: {target_text(report)})"]
    image = image_text(report)
    if image is not None:
        lines.append(line_start(image))
    groups = [(name, summary, _shown(ds, settings)) for name, summary, ds in grouped(report)]
    clean_count = sum(1 for _, summary, ds in groups if not ds and summary is not None and summary.live is None)
    collapse = settings.quiet or (clean_count > MAX_CLEAN_LISTED and not settings.verbose)
    for name, summary, ds in groups:
        if collapse and not ds and summary is not None and summary.live is None:
            continue
        lines.append("")
        lines.append(line_start(_head(name, summary, settings)))
        shown, hidden = capped(ds)
        for d in shown:
            severity = _style(settings, f"{d.severity.value:<7}", fg=_COLORS[d.severity])
            lines.extend(format_diagnostic_block(d, severity))
        lines.extend(f"  {hidden_line(code, count, None)}" for code, count in hidden.items())
    if collapse and clean_count:
        lines.append("")
        lines.append(f"{clean_count} more model(s) without findings")
    if report.suppressed and settings.verbose:
        lines.append("")
        lines.append("suppressed (not counted):")
        for d in report.suppressed:
            how = d.suppression
            why = f"{how.kind} {how.by}" + (f": {clean(how.reason)}" if how.reason else "") if how else ""
            lines.extend(format_diagnostic_block(d, f"{d.severity.value:<7}"))
            lines.append(f"          suppressed by {why}")
    lines.append("")
    lines.append(summary_line(report, settings.fail_on))
    return "\n".join(lines) + "\n"
