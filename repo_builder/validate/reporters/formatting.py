"""What every reporter shares: printable text, the one diagnostic formatter, the verdict under ``--fail-on``,
the deploy target's description and paths as CI tools want them.

Light imports only: ``repo-builder build`` and ``compile-pending`` print diagnostics through this module too.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from repo_builder.store.urls import is_remote
from repo_builder.validate.records import Diagnostic, Severity
from repo_builder.validate.report import ModelSummary, Report
from repo_builder.validate.suppress import acknowledged_refusals

REPOSITORY_GROUP = "(repository)"


@dataclass(frozen=True)
class RenderSettings:
    """How to render: the same report can go to a terminal, a file and a CI service in one run."""

    fail_on: Severity = Severity.ERROR  # the verdict ("ok", OK/FAILED) agrees with the exit code under this
    color: bool = False  # text only
    quiet: bool = False  # text: only findings at warning level or above, and the summary
    verbose: bool = False  # text: list every model, even in a big clean repository
    workspace: str | None = None  # github/sarif: paths relative to this folder (default: $GITHUB_WORKSPACE)


# What a human-facing format never prints raw (issue 28 item 3, issue 20 item 2): C0 controls (NUL, CR,
# BEL, ESC ...), DEL, C1 controls (U+0080-U+009F: 8-bit CSI and friends), the bidirectional marks,
# embeddings, overrides and isolates (U+202E reorders the shown name), and the Unicode line/paragraph
# separators. Newline and tab are kept only in content printed as a block (``newlines=True``).
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_ESCAPED_NAME = re.compile(f"[\t\n{_UNSAFE}]")
_ESCAPED_BLOCK = re.compile(f"[{_UNSAFE}]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def exact(text: str | None) -> str:
    """Text for machine formats (JSON, SARIF, JUnit): the exact characters, only undecodable bytes in
    names (surrogate escapes) become ``\\xNN`` so the text can be encoded at all."""
    if text is None:
        return ""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def clean(text: str | None, *, newlines: bool = False) -> str:
    """The one escaping function of every human-facing format (text, github, one-line diagnostics, CLI
    errors), for names and file content alike, whether the output is a terminal or not.

    Control characters, DEL, C1 controls, bidi overrides and NUL are shown visibly (``\\n``, ``\\x1b``,
    ``\\u202e``), undecodable bytes as ``\\xNN``. With ``newlines`` (a message printed as an indented
    block) newline and tab stay; callers indent the lines that follow, so no line can start with ``::``.
    """
    return (_ESCAPED_BLOCK if newlines else _ESCAPED_NAME).sub(_visible, exact(text))


def line_start(text: str) -> str:
    """``text`` made safe as the start of an output line: GitHub runners execute any stdout line that starts
    with ``::`` as a workflow command, so a leading colon is shown as ``\\x3a``."""
    return "\\x3a" + text[1:] if text.startswith(":") else text


def indented(text: str, indent: str) -> str:
    """A block message with every line after the first indented like the first (never at column 0)."""
    return text.replace("\n", "\n" + indent)


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
    return " ".join(clean(text, newlines=True).split())


def format_diagnostic_block(d: Diagnostic, severity: str | None = None) -> list[str]:
    """The indented multi-line form the text report uses under each model's status line."""
    pad = " " * 10
    lines = [
        f"  {severity or f'{d.severity.value:<7}'} {d.code} {d.rule}  {where(d)}",
        pad + indented(clean(d.message, newlines=True), pad),
    ]
    if d.hint:
        lines.append(f"{pad}hint: {indented(clean(d.hint, newlines=True), pad + '      ')}")
    return lines


# Human formats print at most this many findings of one rule per model; the rest are counted (JSON, SARIF
# and JUnit keep every finding). A repository with 100,000 findings stays readable and fast to print.
MAX_SHOWN_PER_RULE = 20


def capped(ds: list[Diagnostic], cap: int = MAX_SHOWN_PER_RULE) -> tuple[list[Diagnostic], dict[str, int]]:
    """The diagnostics a human format prints (the first ``cap`` of each rule code, in order) and how many
    of each code it leaves out; linear in the number of diagnostics."""
    seen: dict[str, int] = {}
    shown: list[Diagnostic] = []
    hidden: dict[str, int] = {}
    for d in ds:
        seen[d.code] = seen.get(d.code, 0) + 1
        if seen[d.code] <= cap:
            shown.append(d)
        else:
            hidden[d.code] = hidden.get(d.code, 0) + 1
    return shown, hidden


def hidden_line(code: str, count: int, model: str | None) -> str:
    where = f" for {clean(model)}" if model else ""
    return f"... and {count:,} more {code} finding(s){where} not shown (--format json lists every finding)"


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


def image_text(report: Report) -> str | None:
    """The image Python steps were judged in (``Triton 24.12 (nvcr.io/...:24.12-py3, Python 3.12, x86_64),
    GPU server``), or why none was; None when the report does not say."""
    return clean(report.image) if report.image is not None else None


def image_json(report: Report) -> dict[str, Any] | None:
    """The judged image as JSON: ``judged`` and ``text`` always, the target's fields when one was judged."""
    if report.image is None:
        return None
    d = report.deploy
    fields: dict[str, Any] = {"judged": d is not None, "text": exact(report.image)}
    values = (d.release, d.image_name, d.python, d.platform, d.gpu, d.step_packages) if d is not None else (None,) * 6
    fields.update(zip(("release", "image", "python", "platform", "gpu", "step_packages"), values, strict=True))
    return fields


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
    return line + suppressed_note(report)


def suppressed_note(report: Report) -> str:
    """``; 3 suppressed`` and, when errors were set aside, which models still will not load."""
    if not report.suppressed:
        return ""
    note = f"; {len(report.suppressed)} suppressed"
    set_aside = acknowledged_refusals(report)
    if set_aside:
        note += f" (errors set aside with a reason; still will not load: {', '.join(clean(m) for m in set_aside)})"
    return note


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


def workspace_path(report: Report, d: Diagnostic, workspace: str | None, text: Callable[[str | None], str] = clean) -> str:
    """The diagnostic's file as CI services want it: relative to ``workspace`` (the checkout root,
    ``$GITHUB_WORKSPACE`` by default) when the repository lies inside it, else to the working directory;
    an object store URL stays a URL. ``text`` is ``clean`` for people, ``exact`` for machine formats."""
    root = report.repository.location or str(report.repository.root)
    if is_remote(root):
        return text(f"{root.rstrip('/')}/{d.path}")
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
            return text(relative.replace(os.sep, "/"))
    return text(str(path))
