"""Click options more than one command takes, and the one way to bundle options into a decorator.

Not a command module (``main.COMMANDS`` names those); light imports only.
"""

from __future__ import annotations

from collections.abc import Callable
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
