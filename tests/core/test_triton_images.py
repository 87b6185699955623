"""The stock py3 image table: every value sourced, TensorRT as the TensorRT table says, Python and glibc as
the image's Ubuntu has them, and releases it cannot vouch for refused with the known ones."""

from __future__ import annotations

import re

import pytest

from repo_builder.errors import UserError
from repo_builder.tensorrt_releases import NO_RELEASE, TRITON_TENSORRT
from repo_builder.triton_images import IMAGE, IMAGES, ImageRow, image_row, known_images, newest_release

ROWS = list(IMAGES.values())
_SPECIFIER = re.compile(r"^((==|>=|<=|<|>|!=|~=)\d+(\.\d+)*(,\s*)?)*$")


def _ids(rows: list[ImageRow]) -> list[str]:
    return [row.release for row in rows]


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_image_row_names_a_source_for_each_value_when_read(row: ImageRow) -> None:
    for name in ("python_source", "packages_source", "backends_source", "tensorrt_source"):
        assert getattr(row, name).strip(), name
    # A source names the release it speaks for, except the TensorRT table's own (checked against it below).
    for name in ("python_source", "packages_source", "backends_source"):
        assert row.release in getattr(row, name) or row.release.replace(".", "-") in getattr(row, name), name


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_image_row_has_the_tensorrt_of_the_tensorrt_table_when_read(row: ImageRow) -> None:
    assert (row.tensorrt, row.tensorrt_source) == TRITON_TENSORRT[row.release]


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_image_row_has_the_python_and_glibc_of_its_ubuntu_when_read(row: ImageRow) -> None:
    expected = {"22.04": ("3.10", "2.35"), "24.04": ("3.12", "2.39")}
    assert (row.python, row.glibc) == expected[row.ubuntu]
    assert f"Python {row.python}" in row.python_source or f"names {row.python}" in row.python_source


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_image_row_lists_numpy_1_and_well_formed_packages_when_read(row: ImageRow) -> None:
    names = [name for name, _ in row.packages]
    assert len(names) == len(set(names)) and {"numpy", "wheel", "setuptools"} <= set(names)
    assert all(_SPECIFIER.match(spec) for _, spec in row.packages), row.packages
    assert row.numpy_specifier() in ("<2", "==1.26.4")
    # The image's own wheels are not registry distributions: they never appear among the packages.
    assert not set(row.local_wheels) & set(names)
    assert row.image == IMAGE.format(release=row.release) and row.image.endswith(f":{row.release}-py3")


@pytest.mark.parametrize("row", ROWS, ids=_ids(ROWS))
def test_image_row_ships_the_python_backend_and_no_ensemble_folder_when_read(row: ImageRow) -> None:
    assert "python" in row.backends and "tensorrt" in row.backends and "ensemble" not in row.backends
    assert list(row.backends) == sorted(set(row.backends))


def test_image_table_is_sorted_and_knows_only_tensorrt_table_releases_when_read() -> None:
    assert list(IMAGES) == sorted(IMAGES)
    assert set(IMAGES) <= set(TRITON_TENSORRT) and not set(IMAGES) & NO_RELEASE
    assert all(key == row.release for key, row in IMAGES.items())


def test_image_table_switches_to_ubuntu_24_04_at_24_11_when_read_in_order() -> None:
    assert {r.release for r in ROWS if r.ubuntu == "22.04"} == {r.release for r in ROWS if r.release <= "24.10"}
    assert {r.release for r in ROWS if r.ubuntu == "24.04"} == {r.release for r in ROWS if r.release >= "24.11"}


def test_image_table_pins_numpy_below_2_from_24_06_when_read() -> None:
    assert image_row("24.05").packages_source.count("numpy<2") == 0
    assert all('"numpy<2"' in r.packages_source for r in ROWS if r.release >= "24.06")


def test_image_table_adds_virtualenv_at_24_04_and_frontend_packages_at_24_11_when_read() -> None:
    for row in ROWS:
        names = dict(row.packages)
        assert ("virtualenv" in names) == (row.release >= "24.04"), row.release
        assert ("pydantic" in names) == (row.release >= "24.11") == bool(row.local_wheels), row.release
        assert ("openai" in names) == (row.release >= "24.12"), row.release
        if "virtualenv" in names:
            assert {"distlib", "filelock", "platformdirs"} <= set(names)


def test_image_table_drops_tensorflow_at_25_03_and_onnxruntime_only_in_24_02_when_read() -> None:
    for row in ROWS:
        assert ("tensorflow" in row.backends) == (row.release <= "25.02"), row.release
        assert ("onnxruntime" in row.backends) == (row.release != "24.02"), row.release


def test_newest_release_is_the_largest_key_when_called() -> None:
    assert newest_release() == max(IMAGES) == sorted(IMAGES)[-1]
    assert image_row(newest_release()).release == newest_release()


@pytest.mark.parametrize("text", ["24.12", "r24.12", "24.12-py3", " R24.12 ", "24.12-py3-min"])
def test_image_row_accepts_release_spellings_when_normalized(text: str) -> None:
    assert image_row(text) is IMAGES["24.12"]


@pytest.mark.parametrize("release, words", [
    ("25.07", "published no Triton py3 container"),
    ("23.12", "is not in repo-builder's image table"),
    ("99.01", "is not in repo-builder's image table"),
])
def test_image_row_raises_one_line_naming_known_releases_when_release_unknown(release: str, words: str) -> None:
    with pytest.raises(UserError) as info:
        image_row(release)
    message = str(info.value)
    assert words in message and f"(known: {known_images()})" in message and "\n" not in message
    assert all(key in message for key in IMAGES)


@pytest.mark.parametrize("text", ["foo", "24.13", ""])
def test_image_row_raises_user_error_when_release_malformed(text: str) -> None:
    with pytest.raises(UserError):
        image_row(text)


def test_known_images_lists_every_release_once_when_called() -> None:
    assert known_images().split(", ") == sorted(IMAGES)
