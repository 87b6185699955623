"""The rule registry: every rule of every module is registered, coded, named, documented and tested."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from repo_builder.validate.docs import render_rules
from repo_builder.validate.records import Rule
from repo_builder.validate.rules import MODULES, RULES

ROOT = Path(__file__).resolve().parents[2]
# Each module owns one hundred of codes.
PREFIX = {
    "repository": "RB0",
    "layout": "RB1",
    "versions": "RB1",
    "config": "RB2",
    "io": "RB2",
    "warmup": "RB2",
    "batching": "RB3",
    "sequence": "RB3",
    "instances": "RB3",
    "platform": "RB4",
    "model_files": "RB4",
    "dali": "RB4",
    "python_env": "RB4",
    "ensemble_wiring": "RB5",
    "ensemble_types": "RB5",
    "onnx_io": "RB6",
    "tensorrt": "RB7",
    "nvcf": "RB8",
}


def _test_sources() -> str:
    here = Path(__file__).resolve()
    return "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("*.py") if p.resolve() != here)


TEST_SOURCES = _test_sources()


def test_rule_registry_lists_every_module_rule_once() -> None:
    from_modules = [r for m in MODULES for r in m.RULES]
    assert list(RULES) == from_modules
    assert all(isinstance(r, Rule) for r in RULES)
    assert len({id(r) for r in RULES}) == len(RULES)


def test_rule_registry_codes_are_unique_and_well_formed() -> None:
    found = [r.code for r in RULES]
    assert len(found) == len(set(found)), sorted(c for c in found if found.count(c) > 1)
    assert all(re.fullmatch(r"RB\d{3}", c) for c in found), found


def test_rule_registry_names_are_unique_kebab_case() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", n) for n in names), names


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_rule_registry_codes_belong_to_their_module_group(module: object) -> None:
    prefix = PREFIX[module.__name__.rsplit(".", 1)[1]]
    assert all(r.code.startswith(prefix) for r in module.RULES), [r.code for r in module.RULES]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_registry_rule_has_docstring_with_example(rule: Rule) -> None:
    assert len(rule.doc.split()) >= 15, rule.doc
    assert re.search(r"\bfails\b", rule.doc, re.I) and re.search(r"\bpasses\b", rule.doc, re.I), rule.doc


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_registry_rule_code_is_mentioned_by_a_test(rule: Rule) -> None:
    assert rule.code in TEST_SOURCES, f"no test file mentions {rule.code} ({rule.name})"


def test_rules_doc_matches_registry() -> None:
    path = ROOT / "docs" / "rules.md"
    assert path.is_file(), "run: python -m repo_builder.validate.docs > docs/rules.md"
    assert path.read_text(encoding="utf-8") == render_rules(), "regenerate: python -m repo_builder.validate.docs > docs/rules.md"


def test_rules_doc_lists_every_rule() -> None:
    text = render_rules()
    for r in RULES:
        assert f"### {r.code} {r.name}" in text


def test_live_codes_are_documented_and_do_not_collide_with_rules() -> None:
    from repo_builder.validate.docs import _live_codes

    live = _live_codes()
    codes = [c.code for c in live]
    assert set(codes).isdisjoint(r.code for r in RULES)
    assert all(re.fullmatch(r"RB9\d{2}", c) for c in codes)
    text = render_rules()
    assert all(f"### {c.code} {c.rule}" in text for c in live)
