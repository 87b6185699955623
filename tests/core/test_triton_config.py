"""The one Triton config reader (repo_builder/triton_config.py, issue 22): it parses, names where text fails,
refuses unsafe files, and no other module of the package parses config text itself."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from repo_builder import triton_config
from repo_builder.triton_config import (
    MAX_CONFIG_BYTES,
    ConfigParseError,
    parse_config_text,
    read_config_file,
    versions_to_load,
)

PACKAGE = Path(triton_config.__file__).resolve().parent
PARSERS = frozenset({"Parse", "Merge", "ParseLines", "MergeLines"})


def _text_format_parse_calls(source: str) -> list[int]:
    """Lines calling protobuf's text parser (``text_format.Parse(...)`` or a name imported from it)."""
    tree = ast.parse(source)
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("text_format")
        for alias in node.names
        if alias.name in PARSERS
    }
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        qualified = isinstance(func, ast.Attribute) and func.attr in PARSERS and isinstance(func.value, ast.Name) and func.value.id == "text_format"
        if qualified or (isinstance(func, ast.Name) and func.id in imported):
            lines.append(node.lineno)
    return lines


def test_only_triton_config_parses_config_text_when_the_package_is_scanned() -> None:
    found = {
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "triton_config.py" or path.parent != PACKAGE
        for line in _text_format_parse_calls(path.read_text(encoding="utf-8"))
    }
    assert found == set(), f"parse config text with repo_builder.triton_config, not text_format: {sorted(found)}"
    own = _text_format_parse_calls((PACKAGE / "triton_config.py").read_text(encoding="utf-8"))
    assert len(own) == 1  # the scan sees the one real call (so an empty result above means something)


def test_parse_scan_finds_a_call_when_a_module_parses_text_itself() -> None:
    assert _text_format_parse_calls("from google.protobuf import text_format\ntext_format.Parse(t, c)\n") == [2]
    assert _text_format_parse_calls("from google.protobuf.text_format import Merge as m\nm(t, c)\n") == [2]


def test_parse_returns_the_proto_when_the_text_is_a_valid_config() -> None:
    config = parse_config_text('name: "m" max_batch_size: 8 input [{ name: "x" data_type: TYPE_FP32 dims: [3] }]', "m")
    assert (config.name, config.max_batch_size, config.input[0].name) == ("m", 8, "x")


def test_parse_names_origin_line_and_column_when_the_text_does_not_parse() -> None:
    with pytest.raises(ConfigParseError) as caught:
        parse_config_text('name: "m"\nmax_batch_size: "eight"\n', "models/m/config.pbtxt")
    assert str(caught.value).startswith("models/m/config.pbtxt: does not parse as a Triton ModelConfig")
    assert caught.value.line == 2


def _model(root: Path, text: str | None = 'name: "m"') -> Path:
    (root / "m").mkdir(parents=True)
    path = root / "m" / "config.pbtxt"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    return path


def test_read_gives_config_and_text_when_the_file_parses(tmp_path: Path) -> None:
    read = read_config_file(_model(tmp_path))
    assert read.config is not None and read.config.name == "m" and read.text == 'name: "m"' and read.problem is None


def test_read_gives_text_and_where_when_the_file_does_not_parse(tmp_path: Path) -> None:
    read = read_config_file(_model(tmp_path, "name: \nbogus_field: 1\n"))
    assert read.config is None and read.text is not None
    assert read.problem is not None and read.problem.startswith("failed to parse config.pbtxt") and read.line == 2


def test_read_refuses_without_naming_the_target_when_the_config_links_out(tmp_path: Path) -> None:
    secret = tmp_path / "outside-secret.pbtxt"
    secret.write_text('name: "m"', encoding="utf-8")
    path = _model(tmp_path / "repo", None)
    path.symlink_to(secret)
    read = read_config_file(path)
    assert read.config is None and read.text is None and read.problem is not None
    assert "outside-secret" not in read.problem


def test_read_refuses_before_reading_when_the_config_is_over_the_bound(tmp_path: Path) -> None:
    path = _model(tmp_path)
    with path.open("r+b") as fh:
        fh.truncate(MAX_CONFIG_BYTES + 1)  # sparse: no disk used
    read = read_config_file(path)
    assert read.config is None and read.text is None and read.problem is not None


def test_read_refuses_without_blocking_when_the_config_is_a_fifo(tmp_path: Path) -> None:
    path = _model(tmp_path, None)
    os.mkfifo(path)
    read = read_config_file(path)
    assert read.config is None and read.problem is not None


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("", (3,)),  # no policy: the greatest
        ("version_policy { latest { num_versions: 2 } }", (2, 3)),
        ("version_policy { specific { versions: [1, 4] } }", (1,)),  # 4 has no folder: skipped
        ("version_policy { all {} }", (1, 2, 3)),
    ],
)
def test_versions_to_load_follows_the_policy_when_folders_are_present(policy: str, expected: tuple[int, ...]) -> None:
    config = parse_config_text(f'name: "m" {policy}', "m")
    assert versions_to_load(config, [3, 1, 2]) == expected


def test_versions_to_load_is_the_one_implementation_when_validate_and_the_writer_ask(tmp_path: Path) -> None:
    from repo_builder.repository import versions as writer_versions
    from repo_builder.validate.analysis.versions import versions_to_load as validate_versions
    from repo_builder.validate.scan import scan_repository

    assert writer_versions.served_versions is versions_to_load
    path = _model(tmp_path, 'name: "m" version_policy { latest { num_versions: 2 } }')
    for v in ("1", "2", "3", "01"):
        (path.parent / v).mkdir()
    model = scan_repository(tmp_path).models[0]
    assert validate_versions(model) == versions_to_load(model.config, model.version_numbers) == (2, 3)
