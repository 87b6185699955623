"""analysis/manifest.py: repo-builder.json read as untrusted data."""

from __future__ import annotations

import json
from pathlib import Path

from support.validate_repo_helpers import make_add_sub

from repo_builder.validate.analysis.manifest import BuiltFile, built_files, read_manifest
from repo_builder.validate.scan import scan_repository


def test_built_files_skips_entries_that_are_not_strings() -> None:
    data = {"models": {"m": {"versions": {"1": {"files": {"model.py": "ab", "bad": 3}}, "2": "nonsense"}}}}
    assert list(built_files(data, "m")) == [BuiltFile("1", "model.py", "ab")]
    assert list(built_files(data, "absent")) == []


def test_read_manifest_reports_json_that_is_not_a_manifest(repo: Path) -> None:
    make_add_sub(repo)
    (repo / "repo-builder.json").write_text(json.dumps([1, 2]))
    assert "no 'models'" in str(read_manifest(scan_repository(repo)))


def test_read_manifest_none_without_manifest(repo: Path) -> None:
    make_add_sub(repo)
    assert read_manifest(scan_repository(repo)) is None
