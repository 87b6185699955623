"""What a failed load means: the server refused the configuration or layout, or the model's own code
failed (a Python model's import or ``initialize()`` raised). Pure text analysis of the server's reason."""

from __future__ import annotations

import re

from repo_builder.compat import StrEnum
from repo_builder.triton.server_log import log_tail
from repo_builder.triton.standin_onnx_model import MARKER

TRACEBACK_LINES = 3  # frames kept from the model's traceback
# The Python backend reports a model's exception as "<Type>: <message>\n\nAt:\n  <file>(<line>): <func>".
# The client's message arrives flattened to one line, so "At:" is matched between any whitespace.
_FRAMES = re.compile(r"\s+At:\s+")
_FRAME = re.compile(r"(?P<file>\S+)\((?P<line>\d+)\): (?P<function>\S+)")
_EXCEPTION = re.compile(r"(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): (?P<message>.*)")
# Not the model's code: a model.py without the class the Python backend needs is a layout problem.
_LAYOUT = ("has no attribute 'TritonPythonModel'", "model file not found")
# The Python stub process died under the model (its code called os._exit(), or a signal killed it): the
# backend only says the stub "is not healthy", during initialize() or a warmup request alike.
_STUB_DIED = re.compile(r"Stub process '[^']*' is not healthy")
_STATE_PREFIX = re.compile(r"^version \d+ is at UNAVAILABLE state: (?:Internal|Invalid argument|Unavailable): ")
# What the log shows once the server accepted the configuration and began running the model's own code.
_MODEL_RUNNING = ("TRITONBACKEND_ModelInstanceInitialize", "warmup", "pb_stub", "Stub process")
_SERVER_LINE = re.compile(r"^[IEW]\d{4} \d")
_BACKTRACE_FRAME = re.compile(r"^\s*\d+# ")  # what a dying server prints after "Signal (11) received."
_SIGNAL = re.compile(r"^Signal \(\d+\) received\.", re.MULTILINE)
OUTPUT_LINES = 3  # lines kept of what the model itself printed before it died


class Failure(StrEnum):
    REFUSED = "refused"  # configuration or layout: an offline rule could know
    MODEL_CODE = "model-code"  # the model's own code raised


def _one_line(text: str) -> str:
    return " ".join(text.split())


def standin_refusal(reason: str) -> str | None:
    """The ONNX Runtime backend's message when the stand-in refused the model, else None."""
    if MARKER not in reason:
        return None
    message = reason.split(MARKER, 1)[1]
    return _one_line(_FRAMES.split(message, 1)[0])


def _frame(found: re.Match[str]) -> str:
    short = "/".join(found.group("file").split("/")[-2:])  # version/model.py: not the stage's temp path
    return f"{short}({found.group('line')}): {found.group('function')}"


def traceback_detail(reason: str) -> str:
    """``Type: message (at frame; frame; frame)``: the exception and the last frames, on one line."""
    parts = _FRAMES.split(reason, 1)
    head, frames = parts[0], (parts[1] if len(parts) > 1 else "")
    found = _EXCEPTION.search(head)
    exception = _one_line(found.group(0)) if found else _one_line(head)
    lines = [_frame(f) for f in _FRAME.finditer(frames) if not f.group("file").endswith(">")]
    return f"{exception} (at {'; '.join(lines[-TRACEBACK_LINES:])})" if lines else exception


def _without_backtrace(log_text: str) -> str:
    return "\n".join(r for r in log_text.splitlines() if not _BACKTRACE_FRAME.match(r))


def model_output(log_text: str, lines: int = OUTPUT_LINES) -> str:
    """The last lines in the log that the server did not write: what the model's process printed."""
    text = _without_backtrace(log_text)
    rows = [" ".join(r.split()) for r in text.splitlines() if r.strip() and not _SERVER_LINE.match(r)]
    rows = [r for r in rows if r[0] not in "+|"]  # the server's option and model tables
    return " | ".join(rows[-lines:])


def _stub_died(reason: str, log_text: str) -> str:
    said = _STATE_PREFIX.sub("", _one_line(reason)).rstrip("; ")
    printed = model_output(log_text)
    output = f"; its output ends: {printed}" if printed else ""
    return f"the model's Python process exited or was killed (its code called exit() or crashed): {said}{output}"


def classify_crash(exit_text: str, log_text: str) -> tuple[Failure, str]:
    """The server itself died during a load (``exit_text``: "was killed by signal 11"). The model's own
    code when the log shows the server had begun running it (an instance initializing, a warmup), else a
    refusal (Triton 2.51 aborts on some layouts, e.g. a config.pbtxt that is a folder)."""
    tail = log_tail(_without_backtrace(log_text))
    signals = _SIGNAL.findall(log_text)  # the server's own last words; log_tail prefers error lines
    if signals and signals[-1] not in tail:
        tail = f"{tail} | {signals[-1]}" if tail else signals[-1]
    detail = f"tritonserver died while loading it ({exit_text}); the server was restarted"
    detail += f"; the log ends: {tail}" if tail else ""
    running = any(m in log_text for m in _MODEL_RUNNING)
    return (Failure.MODEL_CODE if running else Failure.REFUSED), detail


def classify_failure(reason: str, log_text: str = "") -> tuple[Failure, str]:
    """The kind of failure and the message to report (one line, no long traceback). ``log_text``: what
    the server logged during the load (the model's own output, when its process died)."""
    from_standin = standin_refusal(reason)
    if from_standin is not None:
        return Failure.REFUSED, from_standin
    if _STUB_DIED.search(reason):
        return Failure.MODEL_CODE, _stub_died(reason, log_text)
    python_error = _FRAMES.search(reason) is not None or "Failed to initialize Python stub" in reason
    if python_error and not any(s in reason for s in _LAYOUT):
        return Failure.MODEL_CODE, traceback_detail(reason)
    if _FRAMES.search(reason):
        return Failure.REFUSED, _one_line(_FRAMES.split(reason, 1)[0])
    return Failure.REFUSED, _one_line(reason)


def _in_repository(file: str, models: set[str]) -> str | None:
    """``/tmp/<stage>/repository/STEP/1/model.py`` -> ``STEP/1/model.py``: the path in the user's
    repository of a file the server ran from its staged copy (the last ``MODEL/VERSION/`` in the path)."""
    parts = file.split("/")
    for i in range(len(parts) - 3, -1, -1):
        if parts[i] in models and parts[i + 1].isdigit():
            return "/".join(parts[i:])
    return None


def failing_step(message: str, models: set[str]) -> tuple[str, int] | None:
    """Where a request failed in a step's own code: the first traceback frame inside a model of
    ``models`` (the Python backend lists the innermost frame first), as (``STEP/1/model.py``, line)."""
    for found in _FRAME.finditer(message):
        path = _in_repository(found.group("file"), models)
        if path is not None:
            return path, int(found.group("line"))
    return None


def repository_frames(message: str, models: set[str]) -> str:
    """``message`` with every frame's staged-copy path replaced by its path in the user's repository."""

    def local(found: re.Match[str]) -> str:
        path = _in_repository(found.group("file"), models)
        return found.group(0) if path is None else f"{path}({found.group('line')}): {found.group('function')}"

    return _FRAME.sub(local, message)
