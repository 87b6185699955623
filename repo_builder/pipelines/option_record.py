"""A command-line option as data: a family's own option, or one every ``build`` takes (``request_options``).

Kept apart from ``family.py`` so that ``request_options`` (read by the build check, below the family
records) can declare options without importing the family machinery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FamilyOption:
    """An option as data (the CLI turns it into a click option): a family's own option of its ``build`` (or
    ``export``) subcommand, or one of the options every ``build`` takes (``request_options.BUILD_OPTIONS``)."""

    flags: tuple[str, ...]  # ("--model",) or ("--weights",)
    dest: str  # the keyword ``prepare`` (or the export's ``run``) reads
    help: str
    default: Any = None
    kind: str = "text"  # text | path | int | float | flag | choice
    metavar: str | None = None
    conflicts_with_export: bool = True  # meaningless with --from-export (the export already happened)
    choices: tuple[str, ...] = ()  # kind "choice": the accepted values
    required: bool = False  # export subcommands only: build has --from-export as the alternative
    per_family: bool = False  # BUILD_OPTIONS only: read by the families listing its dest in shared_options
