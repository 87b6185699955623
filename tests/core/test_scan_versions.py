from pathlib import Path

import pytest

from repo_builder.errors import UserError
from repo_builder.validate.scan import parse_version_name, scan_repository


@pytest.mark.parametrize(
    ("name", "number"),
    [("1", 1), ("0", 0), ("42", 42), ("1a", 1), ("-1", -1), ("+3", 3)],
)
def test_parse_version_name_accepts_what_stoll_accepts_when_no_leading_zero(name: str, number: int) -> None:
    assert parse_version_name(name) == (number, None)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("01", "contains leading zeros"),
        ("00", "contains leading zeros"),
        ("abc", "fails to convert to integral number"),
        ("", "fails to convert"),
        ("99999999999999999999", "fails to convert"),
        ("warmup", "reserved"),
    ],
)
def test_parse_version_name_ignores_folder_when_triton_would(name: str, fragment: str) -> None:
    number, why = parse_version_name(name)
    assert number is None
    assert fragment in why


def test_scan_repository_reads_configs_and_versions_when_layout_is_normal(tmp_path: Path) -> None:
    model = tmp_path / "m"
    (model / "1").mkdir(parents=True)
    (model / "01").mkdir()
    (model / "1" / "model.py").write_text("class TritonPythonModel: pass\n")
    (model / "config.pbtxt").write_text('name: "m"\nbackend: "python"\n')
    (tmp_path / "stray.txt").write_text("files at the top are not models")
    repo = scan_repository(tmp_path)
    assert [m.name for m in repo.models] == ["m"]
    entry = repo.models[0]
    assert entry.config is not None and entry.config.backend == "python"
    assert entry.version_numbers == (1,)
    assert entry.version(1).has("model.py")
    assert {v.name for v in entry.versions if v.number is None} == {"01"}


def test_scan_repository_reports_line_and_column_when_config_does_not_parse(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.pbtxt").write_text('name: "m"\nmax_batch_size: "eight"\n')
    entry = scan_repository(tmp_path).models[0]
    assert entry.config is None
    assert entry.config_line == 2
    assert "failed to parse config.pbtxt" in entry.config_problem


def test_scan_repository_flags_non_utf8_and_folder_configs_when_present(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "config.pbtxt").write_bytes(b"\xff\xfe garbage")
    (tmp_path / "b" / "config.pbtxt").mkdir(parents=True)
    a, b = scan_repository(tmp_path).models
    assert "not UTF-8" in a.config_problem
    assert "is a folder" in b.config_problem


def test_scan_repository_raises_user_error_when_path_is_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such folder"):
        scan_repository(tmp_path / "nope")
    (tmp_path / "f").write_text("x")
    with pytest.raises(UserError, match="not a folder"):
        scan_repository(tmp_path / "f")
