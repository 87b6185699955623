"""Where a field sits in a config.pbtxt's text: line and column for diagnostics (1-based).

Each config's text is indexed once (``config_index``: one pass of two regexes), so a diagnostic's position
costs a dictionary look-up and a binary search, whatever the quoting. Scanning the whole text per
diagnostic made a config with N findings cost N full scans: quadratic (issue 20).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

_NEWLINE = re.compile("\n")
_QUOTED = re.compile(r"'([^'\n]{1,200})'")
# A field name at the start of a line (after blanks or an opening brace/bracket/comma), then ':' '{' or '['.
_FIELD = re.compile(r"(?m)^[ \t{\[,]*([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*[:{\[]")
# `name: "x"` / `key: 'x'` (tensors, instance groups, the model; warmup inputs and maps): the text between
# the quotes as written.
_NAMED = re.compile(r"""\b(name|key)[ \t\r\n]*:[ \t\r\n]*(?:"([^"\n]*)"|'([^'\n]*)')""")


@dataclass(frozen=True)
class ConfigIndex:
    """The first offset of every field name and of every quoted ``name``/``key``, and where lines start."""

    line_starts: tuple[int, ...]
    fields: dict[str, int]
    names: dict[str, int]  # `name: "x"`
    keys: dict[str, int]  # `key: "x"`, used when no `name` matches

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1


@lru_cache(maxsize=8)
def config_index(text: str) -> ConfigIndex:
    """Index ``text`` once; the engine asks for each model's positions in turn, so a few entries suffice
    (a string's hash is cached by Python, so a hit costs no rescan)."""
    line_starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]
    fields: dict[str, int] = {}
    for match in _FIELD.finditer(text):
        fields.setdefault(match.group(1), match.start(1))
    names: dict[str, int] = {}
    keys: dict[str, int] = {}
    for match in _NAMED.finditer(text):
        value = match.group(2) if match.group(2) is not None else match.group(3)
        (names if match.group(1) == "name" else keys).setdefault(value, match.start())
    return ConfigIndex(tuple(line_starts), fields, names, keys)


def field_position(text: str, field: str) -> tuple[int, int] | None:
    """The first place ``field`` is set in ``text`` (a top-level or nested field name), or None."""
    index = config_index(text)
    offset = index.fields.get(field)
    return index.position(offset) if offset is not None else None


def name_position(text: str, name: str) -> tuple[int, int] | None:
    """Where ``name: "<name>"`` (a tensor, an instance group, the model) is written, or None."""
    index = config_index(text)
    offset = index.names.get(name)
    if offset is None:
        offset = index.keys.get(name)  # warmup inputs, maps
    return index.position(offset) if offset is not None else None


def finding_position(text: str, message: str, field: str | None) -> tuple[int, int] | None:
    """Line and column for a finding about a config: a name it quotes, else the field it is about."""
    for quoted in _QUOTED.findall(message):
        found = name_position(text, quoted)
        if found is not None:
            return found
    return field_position(text, field) if field else None
