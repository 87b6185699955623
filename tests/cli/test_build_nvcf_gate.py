"""`build --nvcf-assets` prints a CI gate that states the NVCF header pattern (issue 38): without it the gate
judged the repository for a server that forwards no headers, so it always warned (RB801)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.main import main
from repo_builder.nvcf import FORWARD_PATTERN
from repo_builder.pipelines.build_check import CheckRequest, choose_check
from repo_builder.pipelines.nvcf_assets import gate_forward_pattern


def test_gate_states_the_nvcf_pattern_only_when_built_with_nvcf_assets(tmp_path: Path) -> None:
    assert gate_forward_pattern({"nvcf_assets": True}) == FORWARD_PATTERN and gate_forward_pattern({}) is None
    with_assets = choose_check(tmp_path, "python", False, CheckRequest(http_header_forward_pattern=FORWARD_PATTERN))
    assert with_assets.options.http_header_forward_pattern == FORWARD_PATTERN
    assert shlex.split(with_assets.command)[-2:] == ["--http-header-forward-pattern", FORWARD_PATTERN]
    assert "--http-header-forward-pattern" not in choose_check(tmp_path, "python", False, CheckRequest()).command


@pytest.mark.slow
def test_build_nvcf_assets_prints_a_gate_that_passes_without_warning(tmp_path: Path, capsys: Any) -> None:
    repo = tmp_path / "repo"
    assert main(["build", "resnet50", "--weights", "random", "--runtime", "python", "--out", str(repo), "--skip-parity", "-q",
                 "--nvcf-assets", "--format", "json"]) == 0
    validation = json.loads(capsys.readouterr().out)["validation"]
    argv = shlex.split(validation["command"])
    assert argv[argv.index("--http-header-forward-pattern") + 1] == FORWARD_PATTERN
    assert validation["warnings"] == 0 and not any("RB801" in line for line in validation["diagnostics"])
    assert main([*argv[1:], "--format", "json"]) == 0  # the printed gate, run as CI runs it
    assert "RB801" not in capsys.readouterr().out
