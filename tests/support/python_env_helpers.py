"""Python steps with shipped packages for the RB42x tests: a model.py, and wheels laid out as ``pip install
--target`` leaves them (package folders, ``*.dist-info`` with ``WHEEL``, ``RECORD``, ``top_level.txt``),
written by hand in tmp_path: no network, no real wheel."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from support.validate_repo_helpers import make_model

STEP_CONFIG = '''name: "{name}"
backend: "python"
max_batch_size: 0
input [{{ name: "IN" data_type: TYPE_FP32 dims: [4] }}]
output [{{ name: "OUT" data_type: TYPE_FP32 dims: [4] }}]
instance_group [{{ kind: KIND_CPU }}]
{extra}'''

SITE_PACKAGES_LINE = 'sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))\n'

PIL_STEP = '''import os
import sys

{path_line}
import numpy as np
from PIL import Image
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return []
'''


def pil_step_source(names_site_packages: bool = True) -> str:
    return PIL_STEP.format(path_line=SITE_PACKAGES_LINE if names_site_packages else "")


def step_source(*imports: str) -> str:
    """A model.py with these import lines at module level."""
    return "\n".join(imports) + "\n\n\nclass TritonPythonModel:\n    def execute(self, requests):\n        return []\n"


def python_step(root: Path, name: str, source: str, files: dict[str, object] | None = None, extra: str = "") -> Path:
    """A Python-backend model ``name`` whose version 1 holds ``model.py`` (and ``files``)."""
    tree: dict[str, object] = {"model.py": source, **(files or {})}
    return make_model(root, name, STEP_CONFIG.format(name=name, extra=extra), {1: tree})


def fake_wheel(target: Path, distribution: str, version: str, tags: Iterable[str], modules: Iterable[str] = (),
               extensions: Iterable[str] = (), files_per_module: int = 1) -> Path:
    """Lay out an installed wheel in ``target`` (a ``site-packages`` folder): each module a package folder
    with ``files_per_module`` files, compiled modules inside the first package, and its dist-info."""
    modules = list(modules)
    recorded: list[str] = []
    for module in modules:
        folder = target / module
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("raise RuntimeError('a shipped package was imported')\n")
        recorded.append(f"{module}/__init__.py")
        for i in range(files_per_module - 1):
            (folder / f"part_{i}.py").write_text("x = 1\n")
            recorded.append(f"{module}/part_{i}.py")
    for name in extensions:
        path = target / (modules[0] if modules else "") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x7fELF not a real library")
        recorded.append(str(path.relative_to(target)))
    info = target / f"{distribution}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    wheel = "Wheel-Version: 1.0\nGenerator: bdist_wheel (0.43.0)\nRoot-Is-Purelib: false\n"
    (info / "WHEEL").write_text(wheel + "".join(f"Tag: {t}\n" for t in tags))
    (info / "top_level.txt").write_text("".join(f"{m}\n" for m in modules))
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{r},sha256=x,1\n" for r in recorded) + f"{info.name}/RECORD,,\n")
    return info


def write_manifest(root: Path, target: dict[str, object] | None, models: dict[str, object] | None = None) -> None:
    """A ``repo-builder.json`` recording ``target`` (None: no target key)."""
    data: dict[str, object] = {"format": 1, "models": models or {}}
    if target is not None:
        data["target"] = target
    (root / "repo-builder.json").write_text(json.dumps(data))
