"""The reporter registry: turn a ``Report`` into text for people, JSON for tools, GitHub annotations,
JUnit XML or SARIF. ``repo-builder validate --format`` offers exactly the names registered here.

Reporters only format: the verdict and the exit code come from the report alone (under ``fail_on``).
To add one: write ``render_x(report, settings) -> str`` in a module of this package and add a
``Reporter`` line to ``REPORTERS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from repo_builder.errors import UserError
from repo_builder.validate.report import Report
from repo_builder.validate.reporters.formatting import RenderSettings, format_diagnostic
from repo_builder.validate.reporters.github import render_github
from repo_builder.validate.reporters.json_report import (
    SCHEMA_VERSION,
    render_json,
    report_schema,
    report_to_dict,
)
from repo_builder.validate.reporters.junit import render_junit
from repo_builder.validate.reporters.sarif import render_sarif
from repo_builder.validate.reporters.text import MAX_CLEAN_LISTED, render_text

__all__ = [
    "FORMATS",
    "MAX_CLEAN_LISTED",
    "REPORTERS",
    "SCHEMA_VERSION",
    "RenderSettings",
    "Reporter",
    "format_diagnostic",
    "render_report",
    "render_text",
    "report_schema",
    "report_to_dict",
]


@dataclass(frozen=True)
class Reporter:
    name: str
    render: Callable[[Report, RenderSettings], str]
    description: str  # one line for --help


REPORTERS: dict[str, Reporter] = {
    r.name: r
    for r in (
        Reporter("text", render_text, "for people, grouped per model"),
        Reporter("json", render_json, "one document, described by report.schema.json"),
        Reporter("github", render_github, "GitHub Actions annotations on the pull request"),
        Reporter("junit", render_junit, "JUnit XML, one test case per model"),
        Reporter("sarif", render_sarif, "SARIF 2.1.0 for GitHub code scanning"),
    )
}
FORMATS: tuple[str, ...] = tuple(REPORTERS)


def render_report(
    report: Report, fmt: str, color: bool = False, *, settings: RenderSettings | None = None
) -> str:
    """Render ``report`` in the registered format ``fmt`` (``color`` is a shortcut for text on a terminal)."""
    reporter = REPORTERS.get(fmt)
    if reporter is None:
        raise UserError(f"unknown report format '{fmt}' (choose one of: {', '.join(FORMATS)})")
    return reporter.render(report, settings or RenderSettings(color=color))
