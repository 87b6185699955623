"""Issue 20 item 2 / issue 28 item 3: output that cannot inject, in every format, for names and content."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.validate_repo_helpers import make_add_sub, validate

from repo_builder.cli.main import cli, main
from repo_builder.validate.reporters import format_diagnostic, render_report
from repo_builder.validate.reporters.formatting import clean

HOSTILE = "x\n::warning file=a.py::pwned\r\x1b[2J\x07\x00\u202eevil%0A"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture
def hostile_report(repo: Path) -> object:
    model = make_add_sub(repo, HOSTILE.replace("\x00", ""))  # a file name cannot hold NUL
    config = (model / "config.pbtxt").read_text()
    (model / "config.pbtxt").write_text(config + 'parameters { key: "k\x00\x1b]8;;x\x07" value: { string_value: 1 } }\n')
    return validate(repo)


def test_clean_shows_controls_visibly_when_names_hold_them() -> None:
    assert clean("a\nb\x1b[2J\x00\u202ec\x9b\t") == "a\\nb\\x1b[2J\\x00\\u202ec\\x9b\\t"
    assert clean("line\nnext\ttab\r", newlines=True) == "line\nnext\ttab\\r"


def test_text_report_never_starts_a_line_with_workflow_command_when_a_name_injects(hostile_report: object) -> None:
    text = render_report(hostile_report, "text")
    assert not CONTROL.search(text)
    assert not any(line.startswith("::") for line in text.splitlines())
    assert "x\\n::warning file=a.py::pwned\\r\\x1b[2J\\x07\\u202eevil%0A" in text


def test_github_report_escapes_percent_cr_lf_when_a_name_injects(hostile_report: object) -> None:
    lines = render_report(hostile_report, "github").splitlines()
    annotations = [line for line in lines if line.startswith("::")]
    assert annotations and all(re.match(r"::(error|warning|notice) file=[^\n]*::", line) for line in annotations)
    assert not any(CONTROL.search(line) for line in lines)
    assert all(not line.startswith("::warning file=a.py") for line in lines)
    assert any("%250A" in line for line in annotations)  # the name's own "%0A" stays text


def test_machine_formats_keep_the_exact_name_when_it_holds_controls(hostile_report: object) -> None:
    name = HOSTILE.replace("\x00", "")
    data = json.loads(render_report(hostile_report, "json"))
    assert name in [m["name"] for m in data["models"]]
    sarif = json.loads(render_report(hostile_report, "sarif"))
    assert any(r["properties"]["model"] == name for r in sarif["runs"][0]["results"])
    ET.fromstring(render_report(hostile_report, "junit").split("\n", 1)[1])


def test_one_line_form_escapes_when_a_message_quotes_a_nul_from_the_config(hostile_report: object) -> None:
    lines = [format_diagnostic(d) for d in hostile_report.diagnostics]
    assert lines and not any(CONTROL.search(line) or "\n" in line for line in lines)


def test_cli_error_escapes_when_the_named_repository_holds_controls(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(tmp_path / "no\x1b[31msuch\u202e")])
    err = capsys.readouterr().err
    assert code == 2 and "\\x1b[31m" in err and "\x1b" not in err and "\u202e" not in err


def test_validate_command_prints_no_raw_control_when_run_through_click(repo: Path) -> None:
    make_add_sub(repo, "a\x1b[31m\u202e")
    result = CliRunner().invoke(cli, ["validate", str(repo)], color=True)
    assert "\\x1b[31m\\u202e" in result.output and "\u202e" not in result.output
