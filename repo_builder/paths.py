"""Where the package's own data lives, in a source checkout and in an installed wheel alike."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def templates_dir() -> Path:
    """The shipped Jinja2 templates: ``repo_builder/templates`` in a wheel, ``templates/`` in a checkout."""
    installed = _PACKAGE / "templates"
    return installed if installed.is_dir() else _PACKAGE.parent / "templates"
