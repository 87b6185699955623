"""The one progress helper: plain start/end lines outside a terminal, nothing with -q."""

from __future__ import annotations

import re

from repo_builder.export.progress import Stages


def test_steps_write_plain_start_and_end_lines_when_not_a_terminal() -> None:
    lines: list[str] = []
    stages = Stages(True, tty=False, write=lines.append)
    with stages.stage("exporting ONNX"):
        lines.append("inside")
    stages.note("a note")
    assert lines[:2] == ["exporting ONNX ...", "inside"]
    assert re.fullmatch(r"done: exporting ONNX \(\d+\.\d s\)", lines[2])
    assert lines[3] == "a note"


def test_steps_write_nothing_when_disabled() -> None:
    lines: list[str] = []
    stages = Stages(False, tty=False, write=lines.append)
    with stages.stage("exporting ONNX"):
        pass
    stages.note("a note")
    assert lines == []
