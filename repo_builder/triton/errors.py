"""What the embedded server raises: a tool failure (the server) and a refusal (one model).

``ServerError`` is an environment failure (exit 3): tritonserver would not start, died, or hung; the
message names the log file. ``ModelLoadError`` is a refusal (exit 1): the server would not load a model.
Neither is a ``UserError``: ``serve --tritonserver /bin/false`` is not a typo.
"""

from __future__ import annotations

from pathlib import Path

from repo_builder.errors import RefusedError, ToolError


class ServerError(ToolError):
    """tritonserver failed to start, or died; the message names the log file."""

    def __init__(self, message: str, log_path: Path | None = None) -> None:
        super().__init__(message)
        self.log_path = log_path


class ModelLoadError(RefusedError):
    """The server refused to load a model; ``reason`` is its own message."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"tritonserver refused model '{name}': {reason}")
        self.name = name
        self.reason = reason
