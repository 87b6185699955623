"""Rules: (being written)."""

from __future__ import annotations

from repo_builder.validate.model import Rule

RULES: tuple[Rule, ...] = ()
