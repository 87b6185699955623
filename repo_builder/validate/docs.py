"""Generate ``docs/rules.md`` from the rule registry (and the store and live codes): ``python -m repo_builder.validate.docs > docs/rules.md``.

Each rule's docstring is its manual; this only arranges them (a test keeps the file in sync).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Protocol

from repo_builder.validate.live_codes import LIVE_CODES, LiveCode
from repo_builder.validate.records import Rule, Severity
from repo_builder.validate.remote import STORE_CODES, StoreCode
from repo_builder.validate.rules import MODULES

HEADER = """\
# Validation rules

Generated from the rule registry by `python -m repo_builder.validate.docs > docs/rules.md`; do not edit
by hand. Every diagnostic of `repo-builder validate` carries one of these codes. Severities are the
defaults; a rule may report a finding at another level where the text says so.
"""


def _markdown(doc: str) -> str:
    """Docstrings use reST literals (``x``, ``Fails::`` + indented block); turn them into Markdown."""
    text = doc.replace("``", "`")
    text = re.sub(r"::$", ":", text, flags=re.M)
    return text.strip()


def _title(module: ModuleType) -> str:
    first = (module.__doc__ or module.__name__).strip().splitlines()[0]
    return first.rstrip(".")


class ReportCode(Protocol):
    """A code reported outside the rule registry (``LiveCode``, ``StoreCode``): the same four fields."""

    # read-only: the codes are frozen dataclasses
    @property
    def code(self) -> str: ...
    @property
    def rule(self) -> str: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def doc(self) -> str: ...


@dataclass(frozen=True)
class CodeGroup:
    """Codes documented after the registry's rules: a section title and the table's severity note."""

    title: str
    note: str
    codes: tuple[ReportCode, ...]


def _code_groups() -> tuple[CodeGroup, ...]:
    return (
        CodeGroup(
            "Object store checks (`validate s3://...`: what the store's publish record shows)",
            "s3://",
            _store_codes(),
        ),
        CodeGroup("Live checks (`validate --live`: what a real tritonserver says)", "`--live`", _live_codes()),
    )


def _row(code: str, name: str, severity: str) -> str:
    anchor = f"{code}-{name}".lower()
    return f"| [{code}](#{anchor}) | `{name}` | {severity} |"


def _section(title: str, entries: list[tuple[str, str, str, str]]) -> list[str]:
    """``## title`` and one ``### CODE name`` per (code, name, severity line, doc)."""
    out = ["", f"## {title}"]
    for code, name, severity, doc in entries:
        out.extend(["", f"### {code} {name}", "", severity, "", _markdown(doc)])
    return out


def render_rules(modules: tuple[ModuleType, ...] | None = None) -> str:
    """The whole ``docs/rules.md`` text."""
    if modules is None:
        modules = MODULES
    groups: list[tuple[ModuleType, tuple[Rule, ...]]] = [(m, tuple(m.RULES)) for m in modules]
    extra = _code_groups()
    out = [HEADER, "| code | name | severity |", "| --- | --- | --- |"]
    for _module, rules in groups:
        for r in rules:
            out.append(_row(r.code, r.name, r.severity.value))
    for group in extra:
        for c in group.codes:
            out.append(_row(c.code, c.rule, f"{c.severity.value} ({group.note})"))
    for module, rules in groups:
        if rules:
            ensemble = " (ensembles, judged after their members)"
            entries = [
                (r.code, r.name, f"Severity: **{r.severity.value}**" + (ensemble if r.ensemble_only else ""), r.doc)
                for r in rules
            ]
            out.extend(_section(_title(module), entries))
    for group in extra:
        if group.codes:
            out.extend(_section(group.title, [(c.code, c.rule, f"Severity: **{c.severity.value}**", c.doc) for c in group.codes]))
    return "\n".join(out) + "\n"


def _live_codes() -> tuple[LiveCode, ...]:
    """The codes ``validate --live`` adds (``repo_builder.validate.live_codes.LIVE_CODES``)."""
    return tuple(LIVE_CODES)


def _store_codes() -> tuple[StoreCode, ...]:
    """The codes an ``s3://`` repository's publish record adds (``repo_builder.validate.remote.STORE_CODES``)."""
    return tuple(STORE_CODES)


def main() -> int:
    sys.stdout.write(render_rules())
    return 0


if __name__ == "__main__":
    sys.exit(main())
