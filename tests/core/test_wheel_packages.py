"""Every package of repo_builder ships in the wheel: pyproject.toml lists packages by name, so a new
subpackage missing from the list installs editable (the test venv) but not from the wheel."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_lists_every_package_with_an_init_when_compared_with_the_tree() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the test venv is 3.11
        import tomli as tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "repo_builder").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    assert found - listed == set()
