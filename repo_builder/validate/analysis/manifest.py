"""repo-builder's own manifest (``repo-builder.json`` at the repository root), read as untrusted data.

The build writes every built file's sha256 there (repository/manifest.py); validate compares the files
on disk against it offline, with bounded reads, so a missing or changed model file is reported before
a server loads it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.compile_recipe import RECIPE_FILE
from repo_builder.guarded_read import HASHED, loads_json, open_repository_file
from repo_builder.plan_format import SIDECAR_FILE
from repo_builder.spec import SIGNATURE_FILE
from repo_builder.triton_layout import PLACEHOLDER_FILE
from repo_builder.validate.analysis.files import UnsafeFile, read_bounded, regular_file_size, relative_inside
from repo_builder.validate.records import ModelEntry, Repository, RuleContext

MANIFEST_FILE = "repo-builder.json"  # repository/manifest.py MANIFEST_FILE (that module writes; this reads)
MAX_MANIFEST_BYTES = 16 << 20
MAX_HASHED_BYTES = 8 << 30  # bigger files are not hashed (reported as not checked)


@dataclass(frozen=True)
class BuiltFile:
    version: str
    relative: str  # relative to the version folder
    sha256: str


def read_manifest(repository: Repository) -> dict[str, Any] | str | None:
    """The manifest's data, a one-line problem when it is unreadable, or None when there is none."""
    if not any(f.name == MANIFEST_FILE for f in repository.files):
        return None
    try:
        data = loads_json(read_bounded(repository.root / MANIFEST_FILE, repository.root, MAX_MANIFEST_BYTES), MANIFEST_FILE)
    except (UnsafeFile, ValueError) as exc:  # loads_json: one line naming the file (not JSON, nested too deep)
        return str(exc)
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        return f"{MANIFEST_FILE} has no 'models' object"
    return data


def manifest(ctx: RuleContext) -> dict[str, Any] | str | None:
    """The run's manifest, read once."""
    # Asked for every model by RB002 and RB111: one lookup, no cast call.
    facts, key = ctx.facts, (read_manifest, id(ctx.repository))
    data: dict[str, Any] | str | None = facts.get(key, _UNREAD)
    if data is _UNREAD:
        data = facts[key] = read_manifest(ctx.repository)
    return data


_UNREAD: Any = object()  # not read yet (None: read, there is no manifest)


def built_files(data: dict[str, Any], model: str) -> Iterator[BuiltFile]:
    """The files the manifest records for ``model``, skipping entries that are not plain strings."""
    entry = data["models"].get(model)
    versions = entry.get("versions") if isinstance(entry, dict) else None
    if not isinstance(versions, dict):
        return
    for version, record in sorted(versions.items()):
        files = record.get("files") if isinstance(record, dict) else None
        if not isinstance(files, dict):
            continue
        for relative, sha in sorted(files.items()):
            if isinstance(relative, str) and isinstance(sha, str):
                yield BuiltFile(str(version), relative, sha)


def file_sha256(path: Path, root: Path) -> str | None:
    """sha256 of a regular file inside ``root`` (streamed); None when it is not such a file or too big."""
    size = regular_file_size(path, root)
    if size is None or size > MAX_HASHED_BYTES:
        return None
    import hashlib  # stdlib, but ~3 ms at start-up: only a repository with a build manifest hashes

    digest = hashlib.sha256()
    try:
        with open_repository_file(path, root, HASHED) as (fd, _):
            while chunk := os.read(fd, 1 << 20):
                digest.update(chunk)
    except (UnsafeFile, OSError):
        return None
    return digest.hexdigest()


EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def check_built_file(model: ModelEntry, built: BuiltFile, remote: bool = False) -> str | None:
    """Why a recorded file no longer matches: "missing", "changed", "outside"; None when it matches.
    ``remote``: the repository is a mirror of an object store, where files too large to fetch are laid out
    empty: those are not compared (their size is checked against the publish record instead, RB004)."""
    if not relative_inside(built.relative) or not relative_inside(built.version):
        return "outside"
    path = model.path / built.version / built.relative
    size = regular_file_size(path, model.path)
    if size is None:
        return "missing"
    if remote and size == 0 and built.sha256 != EMPTY_SHA256:
        return None  # not downloaded: not checked
    digest = file_sha256(path, model.path)
    if digest is None:
        return None  # too big to hash: not checked
    return None if digest == built.sha256 else "changed"


# Files no server or step reads: documentation, and repo-builder's own records beside a model file (the
# export's signature, a plan's sidecar, a deferred compile's recipe, the placeholder keeping a folder).
DOCUMENTATION = (".md", ".rst", ".markdown")
DOCUMENTATION_STEMS = frozenset({"readme", "license", "licence", "notice", "changelog", "authors", "copying"})
OWN_RECORDS = frozenset({SIGNATURE_FILE, SIDECAR_FILE, RECIPE_FILE, PLACEHOLDER_FILE})


def is_documentation(relative: str) -> bool:
    name = relative.rsplit("/", 1)[-1].lower()
    return name.endswith(DOCUMENTATION) or name.split(".", 1)[0] in DOCUMENTATION_STEMS


def needed_to_serve(model: ModelEntry, relative: str, backend: str | None) -> bool:
    """Whether Triton or the step reads a built file to load and answer: the model file, ``model.py`` and
    what a Python step reads beside it (tokenizer, labels, settings, shipped packages), an ONNX model's
    external data. Not: anything in an ensemble's version folder (Triton reads none of it),
    documentation, repo-builder's own records beside a model file."""
    if model.is_ensemble or is_documentation(relative):
        return False
    return backend == "python" or relative not in OWN_RECORDS


LABELS_FILE = "labels.txt"  # what the classification postprocess step reads beside its model.py
MAX_LABELS_BYTES = 16 << 20


def built_role(data: dict[str, Any], model: str) -> str | None:
    """The role the manifest records for ``model`` (preprocess, model, postprocess, ensemble), or None."""
    entry = data["models"].get(model)
    role = entry.get("role") if isinstance(entry, dict) else None
    return role if isinstance(role, str) else None


def labels_count(path: Path, root: Path) -> int | None:
    """Labels in a labels file (one per line, a final newline optional), or None when it cannot be read."""
    try:
        text = read_bounded(path, root, MAX_LABELS_BYTES).decode("utf-8")
    except (UnsafeFile, UnicodeDecodeError):
        return None
    lines = text.split("\n")
    return len(lines) - 1 if lines and lines[-1] == "" else len(lines)
