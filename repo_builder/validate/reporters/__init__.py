"""The reporter registry: turn a ``Report`` into text for people, JSON for tools, GitHub annotations,
JUnit XML or SARIF. ``repo-builder validate --format`` offers exactly the names registered here.

Reporters only format: the verdict and the exit code come from the report alone (under ``fail_on``).
To add one: write ``render_x(report, settings) -> str`` in a module of this package and add a
``Reporter`` line to ``REPORTERS``. A reporter's module is imported when it first renders (as the CLI loads
its commands): a run renders one or two formats, and every command's error line (``cli/main.py`` uses
``formatting.clean``) imports this package, which must not pull SARIF's rule table and the engine with it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from repo_builder.errors import UserError
from repo_builder.validate.report import Report
from repo_builder.validate.reporters.formatting import RenderSettings, format_diagnostic
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


RenderFn = Callable[[Report, RenderSettings], str]


@dataclass(frozen=True)
class Reporter:
    name: str
    render: RenderFn | str  # the function, or "module:function" of this package, imported on first use
    description: str  # one line for --help

    def function(self) -> RenderFn:
        if not isinstance(self.render, str):
            return self.render
        module, _, function = self.render.partition(":")
        return cast(RenderFn, getattr(importlib.import_module(f"{__name__}.{module}"), function))


REPORTERS: dict[str, Reporter] = {
    r.name: r
    for r in (
        Reporter("text", render_text, "for people, grouped per model"),
        Reporter("json", "json_report:render_json", "one document, described by report.schema.json"),
        Reporter("github", "github:render_github", "GitHub Actions annotations on the pull request"),
        Reporter("junit", "junit:render_junit", "JUnit XML, one test case per model"),
        Reporter("sarif", "sarif:render_sarif", "SARIF 2.1.0 for GitHub code scanning"),
    )
}
_JSON_NAMES = ("SCHEMA_VERSION", "report_schema", "report_to_dict")  # re-exported from json_report, on use


def __getattr__(name: str) -> Any:
    if name in _JSON_NAMES:
        return getattr(importlib.import_module(f"{__name__}.json_report"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
FORMATS: tuple[str, ...] = tuple(REPORTERS)


def render_report(
    report: Report, fmt: str, color: bool = False, *, settings: RenderSettings | None = None
) -> str:
    """Render ``report`` in the registered format ``fmt`` (``color`` is a shortcut for text on a terminal)."""
    reporter = REPORTERS.get(fmt)
    if reporter is None:
        raise UserError(f"unknown report format '{fmt}' (choose one of: {', '.join(FORMATS)})")
    return reporter.function()(report, settings or RenderSettings(color=color))
