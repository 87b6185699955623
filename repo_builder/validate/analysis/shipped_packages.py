"""The packages a Python step can import from its own model folder, and what they were built for.

The stub appends the version folder and the model folder to ``sys.path`` (python_backend ``pb_stub.cc``
``StubSetup``), so their top-level ``*.py`` files, compiled modules and folders import. A subfolder of
the version folder (``1/site-packages/``, where ``pip install --target`` put wheels) imports only when
``model.py`` puts it on ``sys.path``, which it does by naming it: a subfolder no string literal of
``model.py`` names provides nothing.

For each package folder: its importable top-level names (the listing; past ``MAX_ENTRIES`` also each
``*.dist-info``'s ``top_level.txt``), and what each installed wheel was built for (``WHEEL``'s ``Tag:``
lines, the compiled modules its ``RECORD`` lists). Bounded: a folder lists at most ``MAX_ENTRIES`` entries, only small regular
metadata files inside the repository are read, no link is followed out of it, and nothing below a package
folder's top level is listed. A version folder without such subfolders costs no I/O here (the scan listed it).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import cast

from repo_builder.validate.analysis.files import UnsafeFile, read_bounded
from repo_builder.validate.analysis.python_imports import PythonImports
from repo_builder.validate.analysis.wheel_tags import is_extension
from repo_builder.validate.records import FileEntry, ModelEntry, VersionDir
from repo_builder.validate.scan import list_folder

MAX_ENTRIES = 5000  # entries listed per package folder (site-packages of a large step: a few hundred)
MAX_DISTRIBUTIONS = 500  # *.dist-info folders read per package folder
MAX_METADATA_BYTES = 1 << 20  # WHEEL, top_level.txt: a few hundred bytes
MAX_RECORD_BYTES = 16 << 20  # RECORD of the largest wheels (torch): about 3 MB
MAX_EXTENSIONS = 50  # compiled modules kept per distribution (one per distinct suffix suffices)
DIST_INFO = ".dist-info"
_NOT_MODULES = ("__pycache__",)


@dataclass(frozen=True)
class Distribution:
    """One installed wheel (a ``*.dist-info`` folder)."""

    folder: str  # relative to the version folder: "site-packages/pillow-13.0.0.dist-info"
    name: str  # "pillow"
    version: str
    tags: tuple[str, ...] = ()  # WHEEL "Tag:" values
    extensions: tuple[str, ...] = ()  # compiled modules it installed (RECORD paths), one per distinct suffix
    modules: tuple[str, ...] = ()  # top_level.txt
    problem: str | None = None  # its WHEEL could not be read


@dataclass(frozen=True)
class PackageFolder:
    """A folder on the stub's ``sys.path``: the version folder (``""``), the model folder (``".."``) or a
    subfolder of the version folder ``model.py`` names."""

    folder: str
    modules: frozenset[str]
    extensions: tuple[str, ...] = ()  # compiled modules at its top level
    distributions: tuple[Distribution, ...] = ()
    truncated: bool = False  # more than MAX_ENTRIES entries: the rest not listed
    problem: str | None = None


@dataclass(frozen=True)
class StepPackages:
    folders: tuple[PackageFolder, ...]

    @cached_property
    def modules(self) -> frozenset[str]:
        return frozenset().union(*(f.modules for f in self.folders))

    def distributions(self) -> Iterable[Distribution]:
        for f in self.folders:
            yield from f.distributions


def module_name(entry: FileEntry) -> str | None:
    """The top-level module a folder entry provides (``PIL/``, ``six.py``, ``_cffi.cpython-312-x86_64-linux-gnu.so``)."""
    if entry.escapes or entry.broken:
        return None
    if entry.is_dir:
        name = entry.name
        return name if name.isidentifier() and name not in _NOT_MODULES else None
    stem, dot, suffix = entry.name.partition(".")
    if not dot or not stem.isidentifier():
        return None
    return stem if suffix in ("py", "pyc", "so") or (suffix.endswith(".so") and entry.name.count(".") == 2) else None


def _dist_name(folder: str) -> tuple[str, str]:
    name, _, version = folder.removesuffix(DIST_INFO).partition("-")
    return name, version


def _read_text(path: Path, root: Path, limit: int) -> str | None:
    try:
        return read_bounded(path, root, limit, f"{path.parent.name}/{path.name}").decode("utf-8", "replace")
    except UnsafeFile:
        return None


def _record_extensions(text: str | None) -> tuple[str, ...]:
    """Compiled modules a RECORD lists, one per distinct file-name suffix."""
    if not text:
        return ()
    by_suffix: dict[str, str] = {}
    try:
        for row in csv.reader(text.splitlines()):
            path = row[0] if row else ""
            name = path.rsplit("/", 1)[-1]
            if is_extension(name):
                by_suffix.setdefault(name.partition(".")[2], path)
                if len(by_suffix) >= MAX_EXTENSIONS:
                    break
    except csv.Error:  # a NUL byte, a field over csv's limit: what was read so far is kept
        pass
    return tuple(by_suffix.values())


def read_distribution(folder: Path, relative: str, root: Path) -> Distribution:
    """A ``*.dist-info`` folder's name, tags, compiled modules and top-level modules (small files only)."""
    name, version = _dist_name(folder.name)
    wheel = _read_text(folder / "WHEEL", root, MAX_METADATA_BYTES)
    tags = tuple(line.partition(":")[2].strip() for line in (wheel or "").splitlines() if line.lower().startswith("tag:"))
    top_level = _read_text(folder / "top_level.txt", root, MAX_METADATA_BYTES)
    modules = tuple(m.strip().split("/")[0] for m in (top_level or "").splitlines() if m.strip().split("/")[0].isidentifier())
    return Distribution(
        folder=relative,
        name=name,
        version=version,
        tags=tags,
        extensions=_record_extensions(_read_text(folder / "RECORD", root, MAX_RECORD_BYTES)),
        modules=modules,
        problem=None if wheel is not None else f"{relative}/WHEEL is missing or unreadable",
    )


def package_folder(path: Path, relative: str, entries: tuple[FileEntry, ...], root: Path, truncated: bool = False) -> PackageFolder:
    """What one folder on ``sys.path`` provides."""
    modules = {m for m in (module_name(e) for e in entries) if m is not None}
    dists = [e for e in entries if e.is_dir and not e.escapes and e.name.endswith(DIST_INFO)][:MAX_DISTRIBUTIONS]
    prefix = f"{relative}/" if relative else ""
    distributions = tuple(read_distribution(path / e.name, prefix + e.name, root) for e in dists)
    if truncated:  # what the listing left out: the wheels' own word for it (the listing wins where it reaches)
        for d in distributions:
            modules.update(d.modules)
    extensions = tuple(e.name for e in entries if not e.is_dir and is_extension(e.name))
    return PackageFolder(relative, frozenset(modules), extensions, distributions, truncated)


def named_subfolders(v: VersionDir, imports: PythonImports) -> list[FileEntry]:
    """Subfolders of the version folder that ``model.py`` names (the ones it can put on ``sys.path``)."""
    return [e for e in v.files if e.is_dir and not e.escapes and not e.name.endswith(DIST_INFO) and imports.names_folder(e.name)]


def step_packages(model: ModelEntry, v: VersionDir, imports: PythonImports) -> StepPackages:
    """The package folders of version folder ``v`` of ``model`` (memoized on the model entry)."""
    key = (step_packages, v.name)
    found = model.facts.get(key)
    if found is None:
        found = model.facts[key] = _step_packages(model, v, imports)
    return cast(StepPackages, found)  # facts holds what this function stored


def _step_packages(model: ModelEntry, v: VersionDir, imports: PythonImports) -> StepPackages:
    root = model.path.parent
    folders = [
        package_folder(v.path, "", v.files, root),
        PackageFolder("..", frozenset(m for m in (module_name(e) for e in model.files) if m is not None)),
    ]
    for entry in named_subfolders(v, imports):
        entries, truncated, problem = list_folder(v.path / entry.name, root, MAX_ENTRIES)
        if problem is not None:
            folders.append(PackageFolder(entry.name, frozenset(), problem=problem))
            continue
        folders.append(package_folder(v.path / entry.name, entry.name, entries, root, truncated))
    return StepPackages(tuple(folders))


def unnamed_package_folders(v: VersionDir, imports: PythonImports, module: str, root: Path) -> list[str]:
    """Subfolders of ``v`` that hold ``module`` but that ``model.py`` never names (for hints: only
    listed when a module is missing)."""
    found = []
    for entry in v.files:
        if not entry.is_dir or entry.escapes or imports.names_folder(entry.name) or entry.name.endswith(DIST_INFO):
            continue
        entries, _, problem = list_folder(v.path / entry.name, root, MAX_ENTRIES)
        if problem is None and any(module_name(e) == module for e in entries):
            found.append(entry.name)
    return found
