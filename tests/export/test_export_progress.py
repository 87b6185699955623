"""The one progress helper: plain start/end lines outside a terminal, nothing with -q."""

from __future__ import annotations

import re

from repo_builder.export.progress import Phases


def test_steps_write_plain_start_and_end_lines_when_not_a_terminal() -> None:
    lines: list[str] = []
    phases = Phases(True, tty=False, write=lines.append)
    with phases.phase("exporting ONNX"):
        lines.append("inside")
    phases.note("a note")
    assert lines[:2] == ["exporting ONNX ...", "inside"]
    assert re.fullmatch(r"done: exporting ONNX \(\d+\.\d s\)", lines[2])
    assert lines[3] == "a note"


def test_steps_write_nothing_when_disabled() -> None:
    lines: list[str] = []
    phases = Phases(False, tty=False, write=lines.append)
    with phases.phase("exporting ONNX"):
        pass
    phases.note("a note")
    assert lines == []
