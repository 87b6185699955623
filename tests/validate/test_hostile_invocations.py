"""Hostile invocations of validate (issue 38 item 7b, 7c): a stdout whose encoding cannot represent the
report gets escapes and the verdict's exit code; a repository path the system cannot take is a usage
error (exit 2) in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.rule_repo_helpers import IO, MODEL_PY, write_model

from repo_builder.cli.validate import printable

NAME = "modèle_€_模型"  # è is latin-1, the euro sign and the CJK characters are not


def _run(*args: str, encoding: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ)
    if encoding is not None:
        env["PYTHONIOENCODING"] = encoding
    return subprocess.run(
        [sys.executable, "-m", "repo_builder", "validate", *args, "--isolated"],
        capture_output=True, env=env, cwd=cwd, check=False, timeout=120,
    )


def _repo(root: Path, *, refused: bool) -> Path:
    files = {} if refused else {"1/model.py": MODEL_PY}  # no model.py: RB405, an error
    write_model(root, NAME, f'name: "{NAME}"\nbackend: "python"\n{IO}', files or {"1/.keep": ""})
    return root


@pytest.mark.parametrize(("refused", "code"), [(False, 0), (True, 1)])
def test_latin1_stdout_gets_escapes_and_verdict_exit_code_when_name_is_not_latin1(tmp_path: Path, refused: bool, code: int) -> None:
    root = _repo(tmp_path / "r", refused=refused)
    done = _run(str(root), encoding="latin-1")
    assert done.returncode == code, done.stderr.decode("latin-1")
    out = done.stdout.decode("latin-1")
    assert "modèle_\\u20ac_\\u6a21\\u578b" in out  # what latin-1 holds stays, the rest is escaped
    assert ("FAILED" if refused else "OK") in out
    assert b"cannot print" not in done.stderr


def test_latin1_stdout_keeps_json_and_junit_parseable_when_name_is_not_latin1(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r", refused=True)
    as_json = _run(str(root), "--format", "json", encoding="latin-1")
    assert as_json.returncode == 1 and NAME in [m["name"] for m in json.loads(as_json.stdout)["models"]]
    junit = _run(str(root), "--format", "junit", encoding="latin-1")
    assert junit.returncode == 1, junit.stderr
    import xml.etree.ElementTree as ET

    names = {case.get("name") for case in ET.fromstring(junit.stdout.split(b"\n", 1)[1]).iter("testcase")}
    assert any(NAME in (n or "") for n in names), names


def test_printable_leaves_text_alone_when_encoding_represents_it() -> None:
    assert printable(NAME, "utf-8") == NAME
    assert printable(NAME, "latin-1") == "modèle_\\u20ac_\\u6a21\\u578b"
    assert printable(f"<a>{NAME}</a>", "latin-1", "junit") == "<a>mod&#232;le_&#8364;_&#27169;&#22411;</a>"


@pytest.mark.parametrize("shape", ["long", "long-name"])
def test_overlong_repository_path_is_usage_error_in_one_line_when_given(tmp_path: Path, shape: str) -> None:
    path = "/".join(["d" * 200] * 25) if shape == "long" else str(tmp_path / ("n" * 300))
    done = _run(path)
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and len(err) < 400 and "Traceback" not in err
    assert "repository path" in err and ("4,096" in err if shape == "long" else "255" in err)
