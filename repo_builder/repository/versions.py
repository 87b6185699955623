"""Version numbers for a build: the next free version of every step, or one the user names."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from repo_builder.errors import UserError
from repo_builder.validate.scan import parse_version_name


def existing_versions(model_dir: Path) -> tuple[int, ...]:
    """Version folders Triton would load (ignored names such as '01' or 'tmp' do not count)."""
    if not model_dir.is_dir():
        return ()
    found = []
    for child in model_dir.iterdir():
        if child.is_dir():
            number, _ = parse_version_name(child.name)
            if number is not None and number >= 0:
                found.append(number)
    return tuple(sorted(found))


def next_version(model_dir: Path) -> int:
    versions = existing_versions(model_dir)
    return versions[-1] + 1 if versions else 1


def plan_versions(out: Path, names: Sequence[str], requested: int | None, force: bool) -> dict[str, int]:
    """Model name -> version to write. Never an existing version unless ``force``."""
    if requested is None:
        return {name: next_version(out / name) for name in names}
    if requested < 1:
        raise UserError(f"--version must be >= 1, got {requested}")
    taken = [name for name in names if (out / name / str(requested)).exists()]
    if taken and not force:
        where = ", ".join(f"{out / name / str(requested)}" for name in taken)
        raise UserError(f"version {requested} already exists ({where}); pass --force to replace it, or omit --version for the next free one")
    return {name: requested for name in names}
