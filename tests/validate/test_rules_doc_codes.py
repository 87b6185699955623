"""The generated rules reference lists the codes reported outside the rule registry: the object store's
(RB003/RB004) and ``--live``'s (RB9xx), in the table and each with its own section."""

from __future__ import annotations

from repo_builder.validate.docs import render_rules
from repo_builder.validate.live_codes import LIVE_CODES
from repo_builder.validate.remote import STORE_CODES
from repo_builder.validate.rules import RULES


def test_render_rules_lists_store_and_live_codes_when_generated() -> None:
    text = render_rules()
    for c in (*STORE_CODES, *LIVE_CODES):
        assert f"### {c.code} {c.rule}" in text
        assert f"| [{c.code}](#{c.code.lower()}-{c.rule}) | `{c.rule}` |" in text


def test_store_codes_do_not_collide_with_registry_or_live_codes() -> None:
    codes = [c.code for c in (*STORE_CODES, *LIVE_CODES)] + [r.code for r in RULES]
    assert len(codes) == len(set(codes))
