"""The Python 3.11+ names the package uses, for Python 3.10 too (NGC 24.xx containers ship 3.10).

Import ``StrEnum`` and ``UTC`` from here rather than from ``enum``/``datetime``.
"""

from __future__ import annotations

import sys
from datetime import timezone
from enum import Enum
from typing import Any

UTC = timezone.utc  # datetime.UTC (3.11+) is this object

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:

    class StrEnum(str, Enum):
        """``enum.StrEnum`` of Python 3.11: members are strings, ``str()`` and ``format()`` give the value."""

        def __str__(self) -> str:
            return str.__str__(self)

        def __format__(self, spec: str) -> str:
            return str.__format__(self, spec)

        @staticmethod
        def _generate_next_value_(name: str, start: int, count: int, last_values: list[Any]) -> str:
            return name.lower()


__all__ = ["UTC", "StrEnum"]
