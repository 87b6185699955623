"""The scan reads each config.pbtxt whole through the guarded reader, whatever its size: the reader asks for about
the size ``fstat`` gave (at least 64 KiB, at most 4 MiB a read) rather than 4 MiB each time (issue 38)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_builder.triton_config import read_config_file

CONFIG = 'name: "m"\nbackend: "python"\nmax_batch_size: 0\n'


def _padded(size: int) -> str:
    """The config with a comment filling it to exactly ``size`` bytes."""
    filler = size - len(CONFIG) - 3  # "# " and the newline
    assert filler >= 0
    return CONFIG + "# " + "x" * filler + "\n"


@pytest.mark.parametrize("size", [len(CONFIG) + 3, 65535, 65536, 65537, (4 << 20) + 3])
def test_config_read_whole_when_its_size_straddles_a_read_step(tmp_path: Path, size: int) -> None:
    model = tmp_path / "m"
    model.mkdir()
    text = _padded(size)
    (model / "config.pbtxt").write_text(text)
    read = read_config_file(model / "config.pbtxt", tmp_path)
    assert read.problem is None
    assert read.text == text and len(read.text.encode()) == size
    assert read.config is not None and read.config.name == "m" and read.config.backend == "python"


def test_config_read_as_empty_when_the_file_is_empty(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.pbtxt").write_bytes(b"")
    read = read_config_file(model / "config.pbtxt", tmp_path)
    assert read.problem is None and read.text == ""
    assert read.config is not None and read.config.name == ""
