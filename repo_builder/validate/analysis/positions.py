"""Where a field sits in a config.pbtxt's text: line and column for diagnostics (1-based)."""

from __future__ import annotations

import re
from functools import lru_cache

_QUOTED = re.compile(r"'([^'\n]{1,200})'")


@lru_cache(maxsize=4096)
def _field_pattern(field: str) -> re.Pattern[str]:
    # The field name at the start of a line (after blanks or an opening brace), followed by ':' '{' or '['.
    return re.compile(rf"(?m)^[ \t{{\[,]*({re.escape(field)})\s*[:{{\[]")


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def field_position(text: str, field: str) -> tuple[int, int] | None:
    """The first place ``field`` is set in ``text`` (a top-level or nested field name), or None."""
    match = _field_pattern(field).search(text)
    return _position(text, match.start(1)) if match else None


def name_position(text: str, name: str) -> tuple[int, int] | None:
    """Where ``name: "<name>"`` (a tensor, an instance group, the model) is written, or None."""
    match = re.search(rf'\bname\s*:\s*"{re.escape(name)}"', text)
    if match is None:
        match = re.search(rf'\bkey\s*:\s*"{re.escape(name)}"', text)  # warmup inputs, maps
    return _position(text, match.start()) if match else None


def finding_position(text: str, message: str, field: str | None) -> tuple[int, int] | None:
    """Line and column for a finding about a config: a name it quotes, else the field it is about."""
    for quoted in _QUOTED.findall(message):
        found = name_position(text, quoted)
        if found is not None:
            return found
    return field_position(text, field) if field else None
