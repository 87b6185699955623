"""What every reporter shares: printable text, the one diagnostic formatter, the verdict under ``--fail-on``,
the deploy target's description and paths as CI tools want them.

Light imports only: ``repo-builder build`` and ``compile-pending`` print diagnostics through this module too.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from repo_builder.validate.records import Diagnostic, Severity
from repo_builder.validate.report import ModelSummary, Report

REPOSITORY_GROUP = "(repository)"


@dataclass(frozen=True)
class RenderSettings:
    """How to render: the same report can go to a terminal, a file and a CI service in one run."""

    fail_on: Severity = Severity.ERROR  # the verdict ("ok", OK/FAILED) agrees with the exit code under this
    color: bool = False  # text only
    quiet: bool = False  # text: only findings at warning level or above, and the summary
    verbose: bool = False  # text: list every model, even in a big clean repository
    workspace: str | None = None  # github/sarif: paths relative to this folder (default: $GITHUB_WORKSPACE)


def clean(text: str | None) -> str:
    """Printable text: undecodable bytes in names (surrogate escapes) become ``\\xNN``."""
    if text is None:
        return ""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def location(report: Report) -> str:
    """What the user named: a local path or an ``s3://`` URL."""
    return clean(report.repository.location or str(report.repository.root))


def where(d: Diagnostic) -> str:
    """``path[:line[:column]]`` of a diagnostic, relative to the repository root."""
    text = clean(d.path)
    if d.line is not None:
        text += f":{d.line}"
        if d.column is not None:
            text += f":{d.column}"
    return text


def format_diagnostic(d: Diagnostic) -> str:
    """The one-line form of a diagnostic, for logs and command summaries (``build``, ``compile-pending``):
    ``error RB405 model-file-missing m/1/model.py:3:1: message (hint: ...)``."""
    text = f"{d.severity.value} {d.code} {d.rule} {where(d)}: {_one_line(d.message)}"
    return text + (f" (hint: {_one_line(d.hint)})" if d.hint else "")


def _one_line(text: str | None) -> str:
    return " ".join(clean(text).split())


def format_diagnostic_block(d: Diagnostic, severity: str | None = None) -> list[str]:
    """The indented multi-line form the text report uses under each model's status line."""
    lines = [f"  {severity or f'{d.severity.value:<7}'} {d.code} {d.rule}  {where(d)}", f"          {clean(d.message)}"]
    if d.hint:
        lines.append(f"          hint: {clean(d.hint)}")
    return lines


def failing_levels(fail_on: Severity) -> tuple[Severity, ...]:
    if fail_on == Severity.ERROR:
        return (Severity.ERROR,)
    if fail_on == Severity.WARNING:
        return (Severity.ERROR, Severity.WARNING)
    return tuple(Severity)


def verdict_ok(report: Report, fail_on: Severity = Severity.ERROR) -> bool:
    """The verdict every reporter prints: the same one the exit code comes from."""
    return report.exit_code(fail_on) == 0


def target_text(report: Report) -> str:
    """The deploy target the report judged for (a GPU server, a CPU fleet, this machine under --live)."""
    return clean(report.target)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    return value


def live_json(summary: ModelSummary) -> dict[str, Any] | None:
    """The live result as JSON: every field the live check recorded (it grows new ones as it learns)."""
    if summary.live is None:
        return None
    return {k: _plain(v) for k, v in dataclasses.asdict(summary.live).items()}


def summary_line(report: Report, fail_on: Severity = Severity.ERROR) -> str:
    failed = sum(1 for m in report.models if not m.ok)
    counts = [
        f"{report.count(Severity.ERROR)} error(s)",
        f"{report.count(Severity.WARNING)} warning(s)",
        f"{report.count(Severity.INFO)} info",
    ]
    verdict = "OK" if verdict_ok(report, fail_on) else "FAILED"
    line = (
        f"{verdict}: {len(report.models)} model(s), {len(report.models) - failed} ok, {failed} refused; "
        + ", ".join(counts)
    )
    if fail_on != Severity.ERROR and not report.exit_code(Severity.ERROR) and not verdict_ok(report, fail_on):
        line += f" (--fail-on {fail_on.value})"
    # Synthesized requests that failed are warnings (RB903): the run passes but proved less than it could.
    unanswered = sum(1 for d in report.diagnostics if d.code == "RB903" and d.severity == Severity.WARNING)
    if unanswered:
        line += f"; not proven: {unanswered} ensemble(s) did not answer (--fail-on warning gates on it)"
    return line


def grouped(report: Report) -> list[tuple[str, ModelSummary | None, list[Diagnostic]]]:
    """Models in repository order with their diagnostics; repository-level ones first."""
    by_model: dict[str | None, list[Diagnostic]] = {}
    for d in report.diagnostics:
        by_model.setdefault(d.model, []).append(d)
    groups: list[tuple[str, ModelSummary | None, list[Diagnostic]]] = []
    if None in by_model:
        groups.append((REPOSITORY_GROUP, None, by_model[None]))
    known = set()
    for m in report.models:
        known.add(m.name)
        groups.append((m.name, m, by_model.get(m.name, [])))
    for name, ds in by_model.items():
        if name is not None and name not in known:
            groups.append((name, None, ds))
    return groups


def workspace_path(report: Report, d: Diagnostic, workspace: str | None) -> str:
    """The diagnostic's file as CI services want it: relative to ``workspace`` (the checkout root,
    ``$GITHUB_WORKSPACE`` by default) when the repository lies inside it, else to the working directory;
    an object store URL stays a URL."""
    root = report.repository.location or str(report.repository.root)
    if "://" in root:
        return f"{root.rstrip('/')}/{clean(d.path)}"
    path = Path(root, d.path).absolute()
    base = workspace if workspace is not None else os.environ.get("GITHUB_WORKSPACE") or None
    for folder in (base, os.getcwd()):
        if not folder:
            continue
        try:
            relative = os.path.relpath(path, Path(folder).absolute())
        except ValueError:  # another drive on Windows
            continue
        if not relative.startswith(os.pardir) or folder != base:
            return clean(relative.replace(os.sep, "/"))
    return clean(str(path))
