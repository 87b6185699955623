"""Generate ``docs/rules.md`` from the rule registry: ``python -m repo_builder.validate.docs > docs/rules.md``.

Each rule's docstring is its manual; this only arranges them (a test keeps the file in sync).
"""

from __future__ import annotations

import re
import sys
from types import ModuleType

from repo_builder.validate.records import Rule

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


def render_rules(modules: tuple[ModuleType, ...] | None = None) -> str:
    """The whole ``docs/rules.md`` text."""
    if modules is None:
        from repo_builder.validate.rules import MODULES

        modules = MODULES
    groups: list[tuple[ModuleType, tuple[Rule, ...]]] = [(m, tuple(m.RULES)) for m in modules]
    out = [HEADER, "| code | name | severity |", "| --- | --- | --- |"]
    for _module, rules in groups:
        for r in rules:
            anchor = f"{r.code}-{r.name}".lower()
            out.append(f"| [{r.code}](#{anchor}) | `{r.name}` | {r.severity.value} |")
    for c in _live_codes():
        anchor = f"{c.code}-{c.rule}".lower()
        out.append(f"| [{c.code}](#{anchor}) | `{c.rule}` | {c.severity.value} (`--live`) |")
    for module, rules in groups:
        if not rules:
            continue
        out.append("")
        out.append(f"## {_title(module)}")
        for r in rules:
            out.append("")
            out.append(f"### {r.code} {r.name}")
            out.append("")
            out.append(f"Severity: **{r.severity.value}**" + (" (ensembles, judged after their members)" if r.ensemble_only else ""))
            out.append("")
            out.append(_markdown(r.doc))
    live = _live_codes()
    if live:
        out.append("")
        out.append("## Live checks (`validate --live`: what a real tritonserver says)")
        for c in live:
            out.append("")
            out.append(f"### {c.code} {c.rule}")
            out.append("")
            out.append(f"Severity: **{c.severity.value}**")
            out.append("")
            out.append(_markdown(c.doc))
    return "\n".join(out) + "\n"


def _live_codes() -> tuple:
    """The codes ``validate --live`` adds (``repo_builder.validate.live.LIVE_CODES``), when that module exists."""
    try:
        from repo_builder.validate.live import LIVE_CODES
    except ImportError:
        return ()
    return tuple(LIVE_CODES)


def main() -> int:
    sys.stdout.write(render_rules())
    return 0


if __name__ == "__main__":
    sys.exit(main())
