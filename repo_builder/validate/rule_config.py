"""Which findings apply, chosen the way linters let users choose: ``--select`` / ``--ignore`` by code,
code prefix or rule name, a ``[tool.repo-builder.validate]`` table (``pyproject.toml`` or
``.repo-builder.toml``) with per-path overrides, and inline ``# repo-builder: ignore[RB306] reason``
comments in ``config.pbtxt`` (``suppress.py`` applies them).

One limit no setting lifts: a finding that means Triton refuses the model (severity error) can only be
ignored with a reason, and the report still says the model will not load.

Pure data and parsing: no repository I/O; the only file read is the configuration the user points at
(or the one found beside the working directory).
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.validate.known_codes import known_codes

CONFIG_FILES = (".repo-builder.toml", "pyproject.toml")
TABLE = ("tool", "repo-builder", "validate")
MAX_CONFIG_BYTES = 1 << 20  # a configuration file is small; refuse anything bigger than 1 MiB


@dataclass(frozen=True)
class Selector:
    """One ``--select``/``--ignore`` entry: a code (``RB306``), a prefix (``RB3``) or a rule name
    (``io-duplicate-names``), optionally with the reason it is ignored (``RB401:served elsewhere``)."""

    pattern: str
    reason: str | None = None

    def matches(self, code: str, rule: str) -> bool:
        p = self.pattern
        return code == p or rule == p or (p[:2].upper() == "RB" and code.upper().startswith(p.upper()))


@dataclass(frozen=True)
class PathOverride:
    """``per-path-ignores``: findings whose model name or repository path matches ``glob``."""

    glob: str
    ignore: tuple[Selector, ...]

    def applies(self, model: str | None, path: str) -> bool:
        return any(
            fnmatch.fnmatchcase(target, self.glob) or fnmatch.fnmatchcase(target, self.glob.rstrip("/") + "/*")
            for target in (model or "", path)
            if target
        )


@dataclass(frozen=True)
class RuleConfig:
    """What the user chose. Empty ``select``: every rule. ``source`` names where it came from."""

    select: tuple[Selector, ...] = ()
    ignore: tuple[Selector, ...] = ()
    per_path: tuple[PathOverride, ...] = ()
    source: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.select or self.ignore or self.per_path)

    def ignored_by(self, code: str, rule: str, model: str | None, path: str) -> Selector | None:
        """The entry that ignores this finding, if any (global ``ignore`` first, then path overrides)."""
        for s in self.ignore:
            if s.matches(code, rule):
                return s
        for o in self.per_path:
            if o.applies(model, path):
                for s in o.ignore:
                    if s.matches(code, rule):
                        return s
        return None

    def selected(self, code: str, rule: str) -> bool:
        return not self.select or any(s.matches(code, rule) for s in self.select)


def parse_selector(text: str, origin: str) -> Selector:
    """``RB306``, ``RB3``, ``io-duplicate-names`` or any of them with ``:reason``; one that names no known
    code or rule is a usage error suggesting the nearest (a typo must not make another gate)."""
    pattern, _, reason = text.partition(":")
    pattern, reason = pattern.strip(), reason.strip()
    if not pattern or not all(c.isalnum() or c == "-" for c in pattern):
        raise UserError(f"{origin}: '{text}' is not a rule code, code prefix or rule name (e.g. RB306, RB3, io-duplicate-names)")
    known = known_codes()
    if not known.knows(pattern):
        near = known.nearest(pattern)
        suggestion = f"did you mean {near}?" if near else "see docs/rules.md for the codes and names"
        raise UserError(f"{origin}: '{pattern}' is not a known rule code, code prefix or rule name; {suggestion}")
    return Selector(pattern=pattern.upper() if pattern[:2].upper() == "RB" and pattern[2:].isdigit() else pattern, reason=reason or None)


def parse_selectors(values: Iterable[str], origin: str) -> tuple[Selector, ...]:
    """Comma-separated lists, repeatable (``--ignore RB3,RB401:why --ignore RB6``)."""
    out: list[Selector] = []
    for value in values:
        out.extend(parse_selector(part, origin) for part in _split(value))
    return tuple(out)


def _split(value: str) -> list[str]:
    # A reason may hold commas: a part without a code before a colon joins the one before it.
    parts: list[str] = []
    for part in value.split(","):
        head = part.split(":", 1)[0].strip()
        if parts and ":" in parts[-1] and (not head or " " in head):
            parts[-1] += "," + part
        elif part.strip():
            parts.append(part.strip())
    return parts


def _strings(value: Any, origin: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{origin}: '{key}' must be a list of strings (codes, prefixes or rule names)")
    return value


def config_from_table(table: Mapping[str, Any], origin: str) -> RuleConfig:
    """``select``, ``ignore`` and ``per-path-ignores = { "GLOB" = ["RB3", ...] }``; unknown keys refused."""
    known = {"select", "ignore", "per-path-ignores"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise UserError(f"{origin}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    per_path = table.get("per-path-ignores", {})
    if not isinstance(per_path, dict):
        raise UserError(f"{origin}: 'per-path-ignores' must be a table of GLOB = [codes]")
    return RuleConfig(
        select=parse_selectors(_strings(table.get("select", []), origin, "select"), origin),
        ignore=parse_selectors(_strings(table.get("ignore", []), origin, "ignore"), origin),
        per_path=tuple(
            PathOverride(glob=str(glob), ignore=parse_selectors(_strings(v, origin, f"per-path-ignores.{glob}"), origin))
            for glob, v in per_path.items()
        ),
        source=origin,
    )


def read_config_file(path: Path, *, required: bool) -> RuleConfig | None:
    """The table from ``.repo-builder.toml`` (top level or under [tool.repo-builder.validate]) or
    ``pyproject.toml`` ([tool.repo-builder.validate]); None when ``pyproject.toml`` has no such table."""
    # Imported when a file is read: a run without a configuration file starts faster.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the same parser from PyPI (a core dependency there)
        import tomli as tomllib

    try:
        size = path.stat().st_size
        if not path.is_file() or size > MAX_CONFIG_BYTES:
            raise UserError(f"{path}: not a regular file of at most 1 MiB; point --config at a TOML file")
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"{path}: cannot read the configuration ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid TOML ({exc}); fix the file or pass --config another one") from None
    table: Any = data
    for key in TABLE:
        table = table.get(key) if isinstance(table, dict) else None
    if table is None and path.name != "pyproject.toml":
        table = {k: v for k, v in data.items() if k != "tool"} or None
    if table is None:
        if required:
            raise UserError(f"{path}: no [tool.repo-builder.validate] table; add one or drop --config")
        return None
    if not isinstance(table, dict):
        raise UserError(f"{path}: [tool.repo-builder.validate] must be a table")
    return config_from_table(table, str(path))


def find_config(start: Path) -> RuleConfig | None:
    """The nearest configuration from ``start`` upwards, as ruff finds its own: in each folder
    ``.repo-builder.toml`` first, then a ``pyproject.toml`` that has the table."""
    for folder in (start, *start.parents):
        for name in CONFIG_FILES:
            candidate = folder / name
            if candidate.is_file():
                found = read_config_file(candidate, required=name != "pyproject.toml")
                if found is not None:
                    return found
    return None


@dataclass(frozen=True)
class RuleChoice:
    """What ``validate`` was told on its command line (``--select``, ``--ignore``, ``--config``,
    ``--isolated``); ``resolve_rule_config`` turns it into a ``RuleConfig``."""

    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    config: Path | None = None
    isolated: bool = False  # ignore every configuration file
    cwd: Path | None = field(default=None, compare=False)


def resolve_rule_config(choice: RuleChoice) -> RuleConfig:
    """The file's settings (``--config``, else the nearest one) with the command line's on top:
    ``--select`` replaces the file's selection, ``--ignore`` adds to its ignores."""
    base = RuleConfig()
    if choice.config is not None:
        base = read_config_file(choice.config, required=True) or base
    elif not choice.isolated:
        base = find_config((choice.cwd or Path.cwd()).absolute()) or base
    select = parse_selectors(choice.select, "--select") if choice.select else base.select
    ignore = base.ignore + parse_selectors(choice.ignore, "--ignore")
    return RuleConfig(select=select, ignore=ignore, per_path=base.per_path, source=base.source)
