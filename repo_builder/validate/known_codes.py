"""Every code and rule name a report can hold: the registry's rules, the store's codes (``s3://``) and
``--live``'s. ``--select``, ``--ignore``, settings files and inline comments may name only these (a code,
a prefix of one, or a name), so a mistyped entry is a usage error rather than a quietly different gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from repo_builder.validate.live_codes import LIVE_CODES
from repo_builder.validate.remote import STORE_CODES
from repo_builder.validate.rules import RULES


@dataclass(frozen=True)
class KnownCodes:
    codes: tuple[str, ...]  # e.g. "RB306", upper case
    names: tuple[str, ...]  # e.g. "io-duplicate-names"

    def knows(self, pattern: str) -> bool:
        """A rule name, or ``RB`` followed by the start of a known code (``RB``, ``RB3``, ``RB306``)."""
        if pattern in self.names:
            return True
        upper = pattern.upper()
        return upper.startswith("RB") and any(code.startswith(upper) for code in self.codes)

    def nearest(self, pattern: str) -> str | None:
        """The known code or name closest to ``pattern`` (difflib), or None when nothing is close."""
        import difflib  # stdlib, imported on use: only a mistyped code needs it

        candidates = self.codes if pattern[:2].upper() == "RB" else self.names + self.codes
        found = difflib.get_close_matches(pattern.upper() if candidates is self.codes else pattern, candidates, n=1, cutoff=0.5)
        return found[0] if found else None


@cache
def known_codes() -> KnownCodes:
    entries = [(r.code, r.name) for r in RULES]
    entries += [(c.code, c.rule) for c in STORE_CODES] + [(c.code, c.rule) for c in LIVE_CODES]
    return KnownCodes(codes=tuple(sorted({c for c, _ in entries})), names=tuple(sorted({n for _, n in entries})))
