"""Two exception roots: a user's mistake (one line, exit 2) versus the tool's own failure."""

from __future__ import annotations


class RepoBuilderError(Exception):
    """Base of every exception this package raises on purpose."""


class UserError(RepoBuilderError):
    """Bad input: the CLI prints ``error: <message>`` on one line and exits non-zero, no traceback.

    The message names the file (or option) and says what to do.
    """

    exit_code = 2


class MissingDependencyError(UserError):
    """An optional extra (export, serve, tensorrt, remote) is not installed."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the Python package '{package}': install it with "
            f"pip install 'repo-builder[{extra}]'"
        )


class InternalError(RepoBuilderError):
    """A bug or an environment failure that is not the user's input; shown with its traceback."""


def require(module: str, extra: str, purpose: str):
    """Import an optional heavy module lazily, turning ImportError into a one-line UserError."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(module.split(".")[0], extra, purpose) from exc
