"""GitHub Actions workflow commands: one ``::error``/``::warning``/``::notice`` annotation per finding, with
the file relative to the checkout (``$GITHUB_WORKSPACE``) so GitHub can place it on the pull request."""

from __future__ import annotations

from repo_builder.validate.records import Diagnostic, Severity
from repo_builder.validate.report import Report
from repo_builder.validate.reporters.formatting import (
    REPOSITORY_GROUP,
    RenderSettings,
    capped,
    clean,
    grouped,
    hidden_line,
    line_start,
    summary_line,
    workspace_path,
)

_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report, settings: RenderSettings | None = None) -> str:
    settings = settings or RenderSettings()
    lines = []
    shown: list[Diagnostic] = []
    notes: list[str] = []
    for name, _summary, ds in grouped(report):
        kept, hidden = capped(ds)
        shown += kept
        model = None if name == REPOSITORY_GROUP else name
        notes += [hidden_line(code, count, model) for code, count in hidden.items()]
    for d in shown:
        props = [f"file={_escape_property(workspace_path(report, d, settings.workspace))}"]
        if d.line is not None:
            props.append(f"line={d.line}")
            if d.column is not None:
                props.append(f"col={d.column}")
        props.append(f"title={_escape_property(f'{d.code} {d.rule}')}")
        text = clean(d.message, newlines=True)
        if d.model is not None:
            text = f"[{clean(d.model)}] {text}"
        if d.hint:
            text += f"\nhint: {clean(d.hint, newlines=True)}"
        lines.append(f"::{_LEVELS[d.severity]} {','.join(props)}::{_escape_data(text)}")
    lines += [line_start(note) for note in notes]  # plain lines: never a workflow command
    lines.append(summary_line(report, settings.fail_on))
    return "\n".join(lines) + "\n"
