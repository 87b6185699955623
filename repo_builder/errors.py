"""Exception roots and their exit codes: the CLI maps each root to one exit code and one line on stderr.

| root                 | exit | meaning                                                                 |
| -------------------- | ---- | ----------------------------------------------------------------------- |
| ``UserError``        | 2    | bad input or usage: the message names the file/option and what to do     |
| ``RefusedError``     | 1    | the repository (or a model) is refused: Triton would not load it        |
| ``ToolError``        | 3    | the environment or a tool failed: server would not start, no GPU, ...   |
| ``InternalError``    | 4    | a bug in repo-builder: a short "please report" line, traceback with -v  |

Any other exception escaping a command is treated as an ``InternalError``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_TOOL = 3
EXIT_INTERNAL = 4


class RepoBuilderError(Exception):
    """Base of every exception this package raises on purpose."""

    exit_code = EXIT_INTERNAL


class UserError(RepoBuilderError):
    """Bad input: the CLI prints ``error: <message>`` on one line and exits 2, no traceback.

    The message names the file (or option) and says what to do.
    """

    exit_code = EXIT_USAGE


class RefusedError(RepoBuilderError):
    """The repository was judged and refused (the report says why): exit 1."""

    exit_code = EXIT_REFUSED


class ToolError(RepoBuilderError):
    """The machine or a tool failed, not the input: tritonserver would not start, no GPU, trtexec crashed."""

    exit_code = EXIT_TOOL


class MissingDependencyError(ToolError):
    """An optional extra (export, serve, tensorrt, remote) is not installed."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the Python package '{package}': install it with "
            f"pip install 'repo-builder[{extra}]'"
        )


class InternalError(RepoBuilderError):
    """A bug in repo-builder: reported as such, with the traceback only under ``-v``."""

    exit_code = EXIT_INTERNAL


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import an optional heavy module lazily, turning ImportError into a one-line ToolError."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(module.split(".")[0], extra, purpose) from exc
