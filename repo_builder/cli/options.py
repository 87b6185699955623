"""Click options more than one command takes, and the one way to bundle options into a decorator.

Not a command module (``main.COMMANDS`` names those); light imports only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def option_group(*options: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator applying ``options`` as if stacked above the function in this order (as ``--help`` lists them)."""

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


# Building a TensorRT plan: `compile` and `compile-pending`.
device_option = click.option("--device", type=click.IntRange(min=0), default=0, show_default=True, help="GPU index to build on.")


# The output options every command shares (issue 11): `--format text|json`, `-q/--quiet`, `-v/--verbose`.
# `-v` also makes cli/main.py print the traceback of an internal error.
format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(("text", "json")),
    default="text",
    show_default=True,
    help="text for people; json: one JSON document on stdout (progress stays on stderr).",
)
quiet_option = click.option("-q", "--quiet", is_flag=True, help="Print only problems and the result: no progress.")
verbose_option = click.option(
    "-v", "--verbose", is_flag=True, help="Print more detail, and the traceback of an internal error."
)


@dataclass(frozen=True)
class Output:
    """The shared output options as one value: what a command prints and how."""

    format: str = "text"
    quiet: bool = False
    verbose: bool = False

    @property
    def json(self) -> bool:
        return self.format == "json"

    def progress(self, message: str) -> None:
        """A line for someone waiting: on stderr (stdout stays machine-readable), none under ``-q``."""
        if not self.quiet:
            click.echo(message, err=True)

    def detail(self, message: str) -> None:
        """A line only ``-v`` asks for, on stderr."""
        if self.verbose:
            click.echo(message, err=True)


def check_quiet_verbose(quiet: bool, verbose: bool) -> None:
    if quiet and verbose:
        raise click.UsageError("-q/--quiet and -v/--verbose exclude each other")


def output_options(func: F) -> F:
    """Add ``--format text|json``, ``-q/--quiet`` and ``-v/--verbose`` to a click command; the command
    receives them as one keyword argument ``output: Output``::

        @click.command("x")
        @output_options
        def command(..., output: Output) -> int:
            output.progress("working ...")
    """

    @functools.wraps(func)
    def wrapper(*args: Any, output_format: str, quiet: bool, verbose: bool, **kwargs: Any) -> Any:
        check_quiet_verbose(quiet, verbose)
        return func(*args, output=Output(output_format, quiet, verbose), **kwargs)

    # The command click sees takes the three options instead of ``output``: not an F, by design.
    return option_group(format_option, quiet_option, verbose_option)(wrapper)  # type: ignore[return-value]
