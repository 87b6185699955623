"""Rules users can configure (issue 22): --select/--ignore by code, prefix or name, a settings file with
per-path overrides, inline ``# repo-builder: ignore[...]`` comments; never a lie about loadability."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.rule_repo_helpers import MODEL_PY, write_model

from repo_builder.deploy_target import resolve_target
from repo_builder.errors import UserError
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Severity, ValidateOptions
from repo_builder.validate.reporters import render_report
from repo_builder.validate.rule_config import (
    RuleChoice,
    parse_selectors,
    read_config_file,
    resolve_rule_config,
)
from repo_builder.validate.suppress import apply_rule_config, inline_comments

DUP_IO = """\
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
IO = """\
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def _repo(root: Path, dup_header: str = "", dup_line_comment: str = "") -> Path:
    """``dup``: a warning RB205 on line 3 (+ header lines); ``bad``: an error RB405 (no model.py)."""
    io = DUP_IO.replace("]\noutput", f"] {dup_line_comment}\noutput", 1) if dup_line_comment else DUP_IO
    write_model(root, "dup", f'{dup_header}name: "dup"\nbackend: "python"\n{io}', {"1/model.py": MODEL_PY})
    write_model(root, "legacy_dup", f'name: "legacy_dup"\nbackend: "python"\n{DUP_IO}', {"1/model.py": MODEL_PY})
    write_model(root, "bad", f'name: "bad"\nbackend: "python"\n{IO}')
    return root


def _judge(
    root: Path,
    *,
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    config: Path | None = None,
    options: ValidateOptions | None = None,
):
    report = validate_repository(root, options or ValidateOptions())
    rules = resolve_rule_config(RuleChoice(select=select, ignore=ignore, config=config, isolated=config is None))
    return apply_rule_config(report, rules)


def _codes(ds) -> list[tuple[str | None, str]]:
    return sorted((d.model, d.code) for d in ds)


def test_ignore_sets_warnings_aside_when_given_code_prefix_or_name(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    for entry in ("RB205", "RB2", "io-duplicate-names", "rb205"):
        report = _judge(root, ignore=(entry,))
        assert ("dup", "RB205") not in _codes(report.diagnostics), entry
        assert ("dup", "RB205") in _codes(report.suppressed), entry
        assert all(d.suppression is not None and d.suppression.kind == "ignore" for d in report.suppressed)


def test_ignore_keeps_errors_when_no_reason_is_given(tmp_path: Path) -> None:
    report = _judge(_repo(tmp_path / "r"), ignore=("RB405",))
    assert ("bad", "RB405") in _codes(report.diagnostics)
    assert report.exit_code() == 1


def test_ignore_with_reason_sets_error_aside_but_model_still_refused(tmp_path: Path) -> None:
    report = _judge(_repo(tmp_path / "r"), ignore=("RB405:deployed elsewhere",))
    assert report.exit_code() == 0
    bad = next(m for m in report.models if m.name == "bad")
    assert not bad.ok  # the tool cannot be configured into saying it loads
    text = render_report(report, "text")
    assert "still will not load: bad" in text
    doc = json.loads(render_report(report, "json"))
    assert doc["summary"]["acknowledged_refusals"] == ["bad"]
    assert doc["suppressed"][0]["suppression"]["reason"] == "deployed elsewhere"


def test_select_narrows_warnings_but_never_hides_refusals(tmp_path: Path) -> None:
    report = _judge(_repo(tmp_path / "r"), select=("RB6",))
    assert ("bad", "RB405") in _codes(report.diagnostics)  # an error is reported whatever is selected
    assert ("dup", "RB205") in _codes(report.suppressed)
    assert {d.suppression.kind for d in report.suppressed if d.suppression} == {"unselected"}


def test_config_file_applies_per_path_ignores_when_glob_matches_model(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text('[tool.repo-builder.validate]\nper-path-ignores = { "legacy_*" = ["RB205"] }\n', encoding="utf-8")
    report = _judge(root, config=cfg)
    assert ("legacy_dup", "RB205") in _codes(report.suppressed)
    assert ("dup", "RB205") in _codes(report.diagnostics)
    assert report.suppressed[0].suppression.source == str(cfg)


def test_config_file_is_found_upwards_from_working_folder(tmp_path: Path) -> None:
    (tmp_path / ".repo-builder.toml").write_text('ignore = ["RB205"]\n', encoding="utf-8")
    deeper = tmp_path / "a" / "b"
    deeper.mkdir(parents=True)
    config = resolve_rule_config(RuleChoice(cwd=deeper))
    assert [s.pattern for s in config.ignore] == ["RB205"]
    assert resolve_rule_config(RuleChoice(cwd=deeper, isolated=True)).empty


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[tool.repo-builder.validate]\nignore = 'RB205'\n", "must be a list"),
        ("[tool.repo-builder.validate]\nignroe = ['RB205']\n", "unknown key(s) ignroe"),
        ("[tool.repo-builder.validate\n", "not valid TOML"),
        ("[tool.repo-builder.validate]\nignore = ['RB 2']\n", "is not a rule code"),
    ],
)
def test_config_file_refused_with_one_line_naming_file_when_malformed(tmp_path: Path, text: str, needle: str) -> None:
    cfg = tmp_path / "pyproject.toml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_config_file(cfg, required=True)
    assert needle in str(caught.value) and str(cfg) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_inline_comment_suppresses_finding_on_its_line_and_is_reported(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r", dup_line_comment="# repo-builder: ignore[RB205] kept for old clients")
    report = _judge(root)
    found = [d for d in report.suppressed if d.model == "dup"]
    assert [(d.code, d.suppression.kind, d.suppression.reason) for d in found] == [
        ("RB205", "inline", "kept for old clients")
    ]
    sarif = json.loads(render_report(report, "sarif"))
    suppressed = [r for r in sarif["runs"][0]["results"] if r.get("suppressions")]
    assert suppressed and suppressed[0]["suppressions"][0] == {
        "kind": "inSource",
        "status": "accepted",
        "justification": "kept for old clients",
    }


def test_inline_comment_in_header_covers_whole_model_and_not_others(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r", dup_header="# repo-builder: ignore[io-duplicate-names] generated upstream\n")
    report = _judge(root)
    assert ("dup", "RB205") in _codes(report.suppressed)
    assert ("legacy_dup", "RB205") in _codes(report.diagnostics)


def test_inline_comment_on_other_line_does_not_suppress(tmp_path: Path) -> None:
    text = 'name: "m"\n# repo-builder: ignore[RB205] x\nbackend: "python"\n'
    (comment,) = inline_comments(text, "m/config.pbtxt")
    assert comment.line == 3  # the next line that is not a comment


def test_inline_comment_without_reason_does_not_set_error_aside(tmp_path: Path) -> None:
    root = tmp_path / "r"
    write_model(root, "bad", f'# repo-builder: ignore[RB405]\nname: "bad"\nbackend: "python"\n{IO}')
    report = _judge(root)
    assert report.exit_code() == 1 and not report.suppressed


def test_selectors_keep_commas_inside_reasons() -> None:
    parsed = parse_selectors(["RB405:one, two and three,RB2"], "--ignore")
    assert [(s.pattern, s.reason) for s in parsed] == [("RB405", "one, two and three"), ("RB2", None)]


def test_cli_select_ignore_and_config_change_exit_code(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "repo_builder", "validate", str(root), "--isolated", *args],
            capture_output=True, text=True, cwd=tmp_path, check=False,
        )

    assert run().returncode == 1
    noted = run("--ignore", "RB405")
    assert noted.returncode == 1 and "give a reason: --ignore 'RB405:why'" in noted.stderr
    ok = run("--ignore", "RB405:elsewhere", "--fail-on", "warning", "--ignore", "RB205")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "still will not load: bad" in ok.stdout
    bad = run("--ignore", "RB 4")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_report_json_with_suppressions_matches_schema(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from repo_builder.validate.reporters import report_schema

    root = _repo(tmp_path / "r", dup_line_comment="# repo-builder: ignore[RB205] why")
    report = _judge(root, ignore=("RB405:why not",))
    assert report.count(Severity.ERROR) == 0
    jsonschema.validate(json.loads(render_report(report, "json")), report_schema())


def test_inline_line_comment_does_not_suppress_finding_on_same_line_number_of_another_file(tmp_path: Path) -> None:
    # RB421 points at line 2 of model.py; the config's comment on its own line 2 is about the config only.
    root = tmp_path / "r"
    model_py = "import numpy\nimport not_a_module_anywhere_xyz\n" + MODEL_PY
    comment = "# repo-builder: ignore[RB421] reviewed"
    write_model(root, "m", f'name: "m"\nbackend: "python"  {comment}\n{IO}', {"1/model.py": model_py})
    judged = ValidateOptions(deploy=resolve_target("24.12"))  # imports are judged against an image
    report = _judge(root, options=judged)
    found = [d for d in report.diagnostics if d.code == "RB421"]
    assert [(d.path, d.line) for d in found] == [("m/1/model.py", 2)]
    assert not [d for d in report.suppressed if d.code == "RB421"]
    # The same comment in the model's header covers the model's findings wherever they point.
    write_model(root, "m", f'{comment}\nname: "m"\nbackend: "python"\n{IO}', {"1/model.py": model_py})
    assert [(d.code, d.path) for d in _judge(root, options=judged).suppressed] == [("RB421", "m/1/model.py")]
