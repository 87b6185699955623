"""analysis/versions.py: the versions Triton loads and misplaced configs."""

from __future__ import annotations

from pathlib import Path

from support.validate_repo_helpers import make_model

from repo_builder.validate.analysis.versions import misplaced_config_hint, version_folder, versions_to_load
from repo_builder.validate.scan import scan_repository


def _model(repo: Path, config: str, versions: dict) -> object:
    make_model(repo, "m", config, versions)
    return scan_repository(repo).models[0]


def test_versions_to_load_takes_latest_by_default(repo: Path) -> None:
    assert versions_to_load(_model(repo, 'backend: "python"\n', {1: {}, 3: {}, 2: {}})) == (3,)


def test_versions_to_load_skips_specific_version_without_folder(repo: Path) -> None:
    model = _model(repo, 'version_policy { specific { versions: [ 1, 4 ] } }\n', {1: {}, 2: {}})
    assert versions_to_load(model) == (1,)


def test_version_folder_none_for_non_canonical_name(repo: Path) -> None:
    model = _model(repo, 'backend: "python"\n', {"1a": {}})
    assert versions_to_load(model) == (1,) and version_folder(model, 1) is None


def test_misplaced_config_hint_names_the_version_folder(repo: Path) -> None:
    model = _model(repo, None, {1: {"config.pbtxt": "x"}})
    assert "m/1/config.pbtxt to m/config.pbtxt" in (misplaced_config_hint(model) or "")
