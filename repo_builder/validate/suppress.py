"""Apply the user's rule choices (``rule_config.RuleConfig``) and the inline comments of each
``config.pbtxt`` to a finished report.

Nothing is dropped: a finding that is ignored, suppressed inline or outside ``--select`` moves from
``Report.diagnostics`` to ``Report.suppressed`` with how and why, and JSON/SARIF list it there (SARIF as
``suppressions``). Model verdicts are never changed: a model Triton refuses stays "refused" even when
the user acknowledged the finding, and a finding of severity error is only set aside with a reason.

Inline comments, read from the config text the scan already holds (no extra I/O):
- ``# repo-builder: ignore[RB306] reason`` at the end of a line: findings on that line of that file;
- the same comment alone on a line: findings on the next line that is not a comment, in that file;
- in the file's header (before the first field): every finding of those codes for the model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from repo_builder.validate.records import Diagnostic, Severity, Suppression
from repo_builder.validate.report import Report
from repo_builder.validate.rule_config import RuleConfig, Selector, parse_selector

_COMMENT = re.compile(r"#\s*repo-builder:\s*ignore\[([^\]]*)\]\s*(.*)$")
MAX_COMMENTS = 1000  # per config: a file full of comments costs no more than this many entries


@dataclass(frozen=True)
class InlineComment:
    selectors: tuple[Selector, ...]
    line: int | None  # the line it covers; None: the whole file (a header comment)


def _header_end(lines: list[str]) -> int:
    for i, text in enumerate(lines, start=1):
        stripped = text.strip()
        if stripped and not stripped.startswith("#"):
            return i
    return len(lines) + 1


def _next_content_line(lines: list[str], after: int) -> int | None:
    for i in range(after + 1, len(lines) + 1):
        stripped = lines[i - 1].strip()
        if stripped and not stripped.startswith("#"):
            return i
    return None


def inline_comments(config_text: str, origin: str) -> tuple[InlineComment, ...]:
    """Every ``# repo-builder: ignore[...]`` comment of a config, with the line it covers."""
    if "repo-builder:" not in config_text:  # the common case costs one substring search
        return ()
    lines = config_text.splitlines()
    header_end = _header_end(lines)
    found: list[InlineComment] = []
    for number, text in enumerate(lines, start=1):
        match = _COMMENT.search(text)
        if match is None:
            continue
        reason = match.group(2).strip() or None
        codes = [c for c in (p.strip() for p in match.group(1).split(",")) if c]
        selectors = tuple(replace(parse_selector(c, f"{origin}:{number}"), reason=reason) for c in codes)
        alone = text.strip().startswith("#")
        if not alone:
            covered: int | None = number
        elif number < header_end:
            covered = None
        else:
            covered = _next_content_line(lines, number)
        found.append(InlineComment(selectors, covered))
        if len(found) >= MAX_COMMENTS:
            break
    return tuple(found)


def _allowed(selector: Selector, d: Diagnostic) -> bool:
    """A finding Triton refuses the model for is set aside only with a reason."""
    return d.severity != Severity.ERROR or selector.reason is not None


def _inline_match(d: Diagnostic, comments: Iterable[InlineComment], config_file: str) -> Selector | None:
    for c in comments:
        # A line comment covers that line of this config only: findings in a member's config or a
        # model.py carry line numbers of their own file.
        if c.line is not None and (c.line != d.line or d.path != config_file):
            continue
        for s in c.selectors:
            if s.matches(d.code, d.rule) and _allowed(s, d):
                return s
    return None


def _suppression(d: Diagnostic, config: RuleConfig, comments: ModelComments | None) -> Suppression | None:
    inline = _inline_match(d, comments.comments, comments.config_file) if comments else None
    if inline is not None:
        return Suppression(kind="inline", reason=inline.reason, by=inline.pattern)
    ignored = config.ignored_by(d.code, d.rule, d.model, d.path)
    if ignored is not None and _allowed(ignored, d):
        return Suppression(kind="ignore", reason=ignored.reason, by=ignored.pattern, source=config.source)
    if d.severity != Severity.ERROR and not config.selected(d.code, d.rule):
        return Suppression(kind="unselected", reason=None, by="--select", source=config.source)
    return None


@dataclass(frozen=True)
class ModelComments:
    config_file: str  # the config the comments are in, as ``Diagnostic.path`` names it
    comments: tuple[InlineComment, ...]


def _config_file(path: Path, root: Path) -> str:
    # The engine's ``Diagnostic.path``: relative to the repository root where possible.
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _comments_by_model(report: Report) -> dict[str, ModelComments]:
    out: dict[str, ModelComments] = {}
    for m in report.repository.models:
        if m.config_text:
            found = inline_comments(m.config_text, f"{m.name}/config.pbtxt")
            if found:
                out[m.name] = ModelComments(_config_file(m.config_path, report.repository.root), found)
    return out


def apply_rule_config(report: Report, config: RuleConfig) -> Report:
    """The report with every ignored or inline-suppressed finding moved to ``suppressed``."""
    comments = _comments_by_model(report)
    if config.empty and not comments:
        return report
    kept: list[Diagnostic] = []
    moved: list[Diagnostic] = list(report.suppressed)
    for d in report.diagnostics:
        found = _suppression(d, config, comments.get(d.model or ""))
        if found is None:
            kept.append(d)
        else:
            moved.append(replace(d, suppression=found))
    return replace(report, diagnostics=tuple(kept), suppressed=tuple(moved))


def acknowledged_refusals(report: Report) -> tuple[str, ...]:
    """Models Triton will refuse although no active finding says so: their errors were set aside."""
    active = {d.model for d in report.diagnostics if d.severity == Severity.ERROR}
    set_aside = {d.model for d in report.suppressed if d.severity == Severity.ERROR}
    return tuple(m.name for m in report.models if not m.ok and m.name in set_aside and m.name not in active)


def needs_reason(report: Report, config: RuleConfig) -> tuple[str, ...]:
    """``--ignore`` entries without a reason that matched a finding of severity error: those findings
    stay (Triton refuses the model), and the user is told how to set them aside honestly."""
    out: list[str] = []
    for d in report.diagnostics:
        found = config.ignored_by(d.code, d.rule, d.model, d.path)
        if d.severity == Severity.ERROR and found is not None and found.reason is None and found.pattern not in out:
            out.append(found.pattern)
    return tuple(out)
