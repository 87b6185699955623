"""analysis/positions.py: where a config field or a named tensor is written."""

from __future__ import annotations

from repo_builder.validate.analysis.positions import field_position, finding_position, name_position

TEXT = 'name: "m"\nmax_batch_size: 8\ninput [\n  {\n    name: "x"\n    dims: [ 4 ]\n  }\n]\n'


def test_field_position_finds_top_level_field() -> None:
    assert field_position(TEXT, "max_batch_size") == (2, 1)


def test_field_position_finds_nested_field() -> None:
    assert field_position(TEXT, "dims") == (6, 5)


def test_name_position_finds_tensor_name() -> None:
    assert name_position(TEXT, "x") == (5, 5)


def test_finding_position_prefers_quoted_tensor_over_field() -> None:
    assert finding_position(TEXT, "model input 'x' must specify 'data_type'", "input") == (5, 5)


def test_finding_position_none_when_field_absent() -> None:
    assert finding_position(TEXT, "no quotes here", "dynamic_batching") is None
