"""Calibration and accuracy data as clients send it: limits, bad files, and the overlap refusal by content."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_builder.errors import UserError
from repo_builder.precision.samples import check_disjoint, read_samples


def test_texts_are_nonempty_lines_up_to_the_limit_when_read(tmp_path: Path) -> None:
    path = tmp_path / "texts.txt"
    path.write_text("one\n\n  \ntwo\nthree\nfour\n", encoding="utf-8")
    samples = read_samples("--calibration-data", path, "texts", 3)
    assert [s.read() for s in samples.samples] == ["one", "two", "three"] and samples.skipped == 1
    assert samples.samples[1].source == f"{path}:4"


def test_images_are_the_folders_image_files_in_name_order_when_read(tmp_path: Path) -> None:
    (tmp_path / "b.png").write_bytes(b"B")
    (tmp_path / "a.jpg").write_bytes(b"A")
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "c.png").write_bytes(b"C")
    samples = read_samples("--accuracy-data", tmp_path, "images", 10)
    assert [s.read() for s in samples.samples] == [b"A", b"B"]


def test_overlap_is_refused_by_content_when_a_copy_has_another_name(tmp_path: Path) -> None:
    (tmp_path / "cal").mkdir()
    (tmp_path / "acc").mkdir()
    (tmp_path / "cal" / "x.jpg").write_bytes(b"same bytes")
    (tmp_path / "acc" / "renamed.jpg").write_bytes(b"same bytes")
    (tmp_path / "acc" / "other.jpg").write_bytes(b"other bytes")
    calibration = read_samples("--calibration-data", tmp_path / "cal", "images", 10)
    accuracy = read_samples("--accuracy-data", tmp_path / "acc", "images", 10)
    with pytest.raises(UserError, match=r"1 of its 2 images are also in --calibration-data \(same content: .*renamed.jpg = .*x.jpg\)"):
        check_disjoint(calibration, accuracy)


def test_bad_data_gets_one_line_naming_the_file_when_missing_empty_or_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^--accuracy-data .*nope: no such file or folder; pass a UTF-8 text file"):
        read_samples("--accuracy-data", tmp_path / "nope", "texts", 5)
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(UserError, match=r"empty.txt: holds no texts"):
        read_samples("--accuracy-data", tmp_path / "empty.txt", "texts", 5)
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(UserError, match=r"latin1.txt: not UTF-8 text .* save it as UTF-8") as info:
        read_samples("--calibration-data", tmp_path / "latin1.txt", "texts", 5)
    assert "\n" not in str(info.value)
    with pytest.raises(UserError, match=r"no image files"):
        read_samples("--calibration-data", tmp_path, "images", 5)
