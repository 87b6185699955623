"""The TensorRT version a plan file's header records, read the way trtexec --getPlanVersionOnly reads it."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from repo_builder.plan_format import PLAN_FILE_TAG, header_tensorrt_version, read_plan_header_version


def _header(tag: int = PLAN_FILE_TAG, layout: int = 0, version: tuple[int, int, int, int] = (10, 3, 0, 26)) -> bytes:
    return struct.pack("<II", tag, layout) + bytes(16) + bytes(version)


def test_header_tensorrt_version_reads_bytes_24_to_27_when_tag_and_layout_0():
    assert header_tensorrt_version(_header() + b"engine") == "10.3.0.26"
    assert header_tensorrt_version(_header(version=(11, 1, 0, 106))) == "11.1.0.106"


@pytest.mark.parametrize("data", [
    _header(tag=0x74727470),  # another tag: not a plan we know
    _header(layout=1),  # a serialization layout trtexec does not read either
    _header()[:27],  # too short
    b"",
    _header(version=(0, 0, 0, 0)),
])
def test_header_tensorrt_version_is_none_when_header_says_nothing_known(data: bytes):
    assert header_tensorrt_version(data) is None


def test_read_plan_header_version_skips_fifo_without_blocking_when_plan_is_not_a_regular_file(tmp_path: Path):
    fifo = tmp_path / "model.plan"
    os.mkfifo(fifo)
    assert read_plan_header_version(fifo) is None
    assert read_plan_header_version(tmp_path / "missing.plan") is None
    plan = tmp_path / "real.plan"
    plan.write_bytes(_header())
    assert read_plan_header_version(plan) == "10.3.0.26"
