"""Unknown rule codes are usage errors (issue 38 item 3): ``--select``, ``--ignore``, the settings file and
inline comments refuse a code, prefix or name that selects nothing, and suggest the nearest known one;
prefixes of a family and rule names keep working."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.rule_repo_helpers import IO, MODEL_PY, write_model

from repo_builder.errors import UserError
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.known_codes import known_codes
from repo_builder.validate.records import ValidateOptions
from repo_builder.validate.rule_config import (
    RuleChoice,
    parse_selectors,
    read_config_file,
    resolve_rule_config,
)
from repo_builder.validate.suppress import apply_rule_config


def _run(root: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "repo_builder", "validate", str(root), *args],
        capture_output=True, text=True, cwd=cwd, check=False, timeout=120,
    )


@pytest.mark.parametrize(
    ("entry", "suggested"),
    [("RB2O5", "RB205"), ("io-duplicate-name", "io-duplicate-names"), ("RB4051", "RB405"), ("RB9999", None)],
)
def test_selector_refused_with_nearest_code_when_unknown(entry: str, suggested: str | None) -> None:
    with pytest.raises(UserError) as caught:
        parse_selectors([f"RB3,{entry}"], "--ignore")
    text = str(caught.value)
    assert text.startswith("--ignore: ") and f"'{entry}'" in text and "\n" not in text
    if suggested is not None:
        assert f"did you mean {suggested}?" in text


def test_selector_refused_with_pointer_to_docs_when_nothing_is_close() -> None:
    with pytest.raises(UserError, match=r"'XYZ' is not a known rule code.*docs/rules\.md"):
        parse_selectors(["XYZ"], "--select")


@pytest.mark.parametrize("entry", ["RB", "rb", "RB3", "RB40", "RB405", "rb205", "RB9", "RB0", "io-duplicate-names", "RB405:why"])
def test_selector_accepted_when_it_is_a_known_code_family_or_name(entry: str) -> None:
    (selector,) = parse_selectors([entry], "--select")
    assert known_codes().knows(selector.pattern)


def test_known_codes_cover_rules_store_and_live_codes() -> None:
    known = known_codes()
    assert {"RB002", "RB205", "RB004", "RB901"} <= set(known.codes)  # a rule, a rule, a store code, a live code
    assert known.knows("RB10") and not known.knows("RB7777")  # RB10x exists; RB7777 is no code


def test_settings_file_refused_naming_file_when_a_code_is_unknown(tmp_path: Path) -> None:
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text('[tool.repo-builder.validate]\nper-path-ignores = { "legacy_*" = ["RB2", "RB2055"] }\n', encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_config_file(cfg, required=True)
    assert str(cfg) in str(caught.value) and "'RB2055'" in str(caught.value) and "did you mean RB205" in str(caught.value)


def test_inline_comment_refused_naming_file_and_line_when_code_is_unknown(tmp_path: Path) -> None:
    root = tmp_path / "r"
    write_model(root, "m", f'name: "m"\nbackend: "python"\n# repo-builder: ignore[RB2O5] typo\n{IO}', {"1/model.py": MODEL_PY})
    report = validate_repository(root, ValidateOptions())
    with pytest.raises(UserError) as caught:
        apply_rule_config(report, resolve_rule_config(RuleChoice(isolated=True)))
    assert "m/config.pbtxt:3" in str(caught.value) and "did you mean RB205" in str(caught.value)


def test_cli_exits_2_on_unknown_codes_and_0_on_known_family(tmp_path: Path) -> None:
    root = tmp_path / "r"
    write_model(root, "m", f'name: "m"\nbackend: "python"\n{IO}', {"1/model.py": MODEL_PY})
    for args in (("--ignore", "RB9999"), ("--select", "XYZ"), ("--select", "RB3,RB2O5")):
        done = _run(root, "--isolated", *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert args[1].split(",")[-1] in done.stderr
    (tmp_path / ".repo-builder.toml").write_text('ignore = ["RB99"]\n', encoding="utf-8")
    from_file = _run(root, cwd=tmp_path)
    assert from_file.returncode == 2 and ".repo-builder.toml" in from_file.stderr and "'RB99'" in from_file.stderr
    ok = _run(root, "--isolated", "--select", "RB2,RB9,io-duplicate-names", "--ignore", "RB3", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
