"""The Triton release -> TensorRT table: sorted, complete month by month, every row sourced, 25.08+ >= 10.13.2."""

from __future__ import annotations

import pytest

from repo_builder.errors import UserError
from repo_builder.tensorrt_releases import (
    NO_RELEASE,
    TRITON_TENSORRT,
    expected_tensorrt,
    known_releases,
    version_parts,
)


def _months(first: str, last: str) -> list[str]:
    year, month = (int(x) for x in first.split("."))
    out = []
    while f"{year:02d}.{month:02d}" <= last:
        out.append(f"{year:02d}.{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def test_release_table_is_sorted_and_has_every_month_when_read_in_order():
    keys = list(TRITON_TENSORRT)
    assert keys == sorted(keys)
    assert sorted([*keys, *NO_RELEASE]) == _months(keys[0], keys[-1])


def test_release_table_never_goes_back_in_tensorrt_and_names_a_source_when_each_row():
    versions = [version_parts(v) for v, _ in TRITON_TENSORRT.values()]
    assert versions == sorted(versions)
    assert all(source.strip() for _, source in TRITON_TENSORRT.values())


def test_release_table_has_at_least_10_13_2_when_release_25_08_or_later():
    for release, (version, _) in TRITON_TENSORRT.items():
        if release >= "25.08":
            assert version_parts(version) >= (10, 13, 2), release


def test_expected_tensorrt_prefers_the_explicit_version_when_both_given():
    assert expected_tensorrt("24.08", None) == "10.3.0"
    assert expected_tensorrt("24.08", "10.16.0") == "10.16.0"
    assert expected_tensorrt(None, None) is None


@pytest.mark.parametrize("release, words", [
    ("foo", "is not a release like 24.08"),
    ("24.13", "is not a release like 24.08"),
    ("21.01", "is not in the TensorRT version table"),
    ("99.01", "is not in the TensorRT version table"),
    ("25.07", "published no Triton py3 container"),
])
def test_expected_tensorrt_raises_one_line_listing_known_releases_when_release_unknown(release: str, words: str):
    with pytest.raises(UserError) as info:
        expected_tensorrt(release, None)
    assert words in str(info.value) and known_releases() in str(info.value) and "\n" not in str(info.value)
