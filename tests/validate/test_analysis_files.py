"""analysis/files.py: bounded reads of regular files inside the repository only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from repo_builder.validate.analysis.files import (
    UnsafeFile,
    read_bounded,
    regular_file_size,
    relative_inside,
    resolves_inside,
)


def test_read_bounded_reads_a_regular_file_inside_root(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"hello")
    assert read_bounded(tmp_path / "a.txt", tmp_path, 10) == b"hello"


def test_read_bounded_refuses_link_out_of_root_without_naming_target(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret-target").write_text("s")
    (root / "link").symlink_to(tmp_path / "secret-target")
    with pytest.raises(UnsafeFile) as err:
        read_bounded(root / "link", root, 10)
    assert "secret-target" not in str(err.value)


def test_read_bounded_refuses_fifo_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(UnsafeFile, match="not a regular file"):
        read_bounded(tmp_path / "pipe", tmp_path, 10)


def test_read_bounded_refuses_file_over_limit(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(UnsafeFile, match="over the 10-byte limit"):
        read_bounded(tmp_path / "big", tmp_path, 10)


def test_regular_file_size_none_for_folder_and_device(tmp_path: Path) -> None:
    (tmp_path / "dev").symlink_to("/dev/null")
    assert regular_file_size(tmp_path, tmp_path.parent) is None
    assert regular_file_size(tmp_path / "dev", tmp_path) is None


@pytest.mark.parametrize(("path", "inside"), [("a/b", True), ("a/../b", True), ("../b", False), ("/etc/passwd", False)])
def test_relative_inside_refuses_paths_that_climb_out(path: str, inside: bool) -> None:
    assert relative_inside(path) is inside


def test_resolves_inside_false_for_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    assert resolves_inside(tmp_path / "loop", tmp_path) in (True, False)  # never raises
