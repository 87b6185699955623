"""GitHub Actions workflow commands: one ``::error``/``::warning``/``::notice`` annotation per finding, with
the file relative to the checkout (``$GITHUB_WORKSPACE``) so GitHub can place it on the pull request."""

from __future__ import annotations

from repo_builder.validate.records import Severity
from repo_builder.validate.report import Report
from repo_builder.validate.reporters.formatting import RenderSettings, clean, summary_line, workspace_path

_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report, settings: RenderSettings | None = None) -> str:
    settings = settings or RenderSettings()
    lines = []
    for d in report.diagnostics:
        props = [f"file={_escape_property(workspace_path(report, d, settings.workspace))}"]
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
        lines.append(f"::{_LEVELS[d.severity]} {','.join(props)}::{_escape_data(text)}")
    lines.append(summary_line(report, settings.fail_on))
    return "\n".join(lines) + "\n"
