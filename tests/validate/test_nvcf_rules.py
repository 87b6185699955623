"""RB8xx: a step built with --nvcf-assets judged for a target that does (not) forward the NVCF headers."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.rule_repo_helpers import IO, found, python_model, validate

from repo_builder.cli.main import main
from repo_builder.validate.records import Severity

ASSET_PARAMETERS = """\
parameters { key: "nvcf_asset_input" value: { string_value: "IMAGE_ASSET" } }
parameters { key: "nvcf_asset_root" value: { string_value: "/var/inf/inputAssets" } }
"""


def test_nvcf_headers_forwarded_warns_when_target_forwards_no_headers(tmp_path: Path) -> None:
    python_model(tmp_path, "pre", IO + ASSET_PARAMETERS)
    [diagnostic] = found(validate(tmp_path), "RB801")
    assert diagnostic.severity == Severity.WARNING
    assert "forwards no HTTP headers" in diagnostic.message and "IMAGE_ASSET" in diagnostic.message
    assert "--http-header-forward-pattern 'NVCF-.*'" in (diagnostic.hint or "")


@pytest.mark.parametrize("pattern", ["X-.*", "NVCF-ASSET-DIR"])
def test_nvcf_headers_forwarded_warns_when_pattern_misses_a_header(tmp_path: Path, pattern: str) -> None:
    python_model(tmp_path, "pre", IO + ASSET_PARAMETERS)
    [diagnostic] = found(validate(tmp_path, http_header_forward_pattern=pattern), "RB801")
    assert f"forwards only headers matching '{pattern}'" in diagnostic.message
    assert "NVCF-FUNCTION-ASSET-IDS" in diagnostic.message


@pytest.mark.parametrize("pattern", ["NVCF-.*", "nvcf-.*", "NVCF"])  # Triton: case-insensitive, partial (measured)
def test_nvcf_headers_forwarded_passes_when_target_forwards_nvcf_headers(tmp_path: Path, pattern: str) -> None:
    python_model(tmp_path, "pre", IO + ASSET_PARAMETERS)
    assert found(validate(tmp_path, http_header_forward_pattern=pattern), "RB801") == []


def test_nvcf_headers_forwarded_passes_when_step_reads_no_assets(tmp_path: Path) -> None:
    python_model(tmp_path, "pre", IO)
    assert found(validate(tmp_path), "RB801") == []


def test_validate_cli_names_flag_in_warning_and_refuses_bad_pattern(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python_model(tmp_path, "pre", IO + ASSET_PARAMETERS)
    assert main(["validate", str(tmp_path), "--fail-on", "warning"]) == 1
    assert "RB801" in capsys.readouterr().out
    assert main(["validate", str(tmp_path), "--fail-on", "warning", "--http-header-forward-pattern", "NVCF-.*"]) == 0
    capsys.readouterr()
    assert main(["validate", str(tmp_path), "--http-header-forward-pattern", "("]) == 2
    assert "--http-header-forward-pattern" in capsys.readouterr().err
