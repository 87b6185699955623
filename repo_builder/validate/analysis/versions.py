"""Which version folders Triton loads (core ``model_lifecycle.cc`` ``VersionsToLoad``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from repo_builder.triton_config import versions_to_load as versions_to_load_by_policy
from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.validate.analysis.memo import model_fact
from repo_builder.validate.records import FileEntry, ModelEntry, VersionDir


def versions_to_load(model: ModelEntry) -> tuple[int, ...]:
    """The versions Triton loads under the model's version policy (default: the latest one).

    Memoized per scanned model over the one implementation, ``triton_config.versions_to_load``.
    """
    return model_fact(model, versions_to_load, _versions_to_load)


def _versions_to_load(model: ModelEntry) -> tuple[int, ...]:
    if model.config is None or not model.config.HasField("version_policy"):
        return model.version_numbers[-1:]  # the default policy, the latest: version_numbers are sorted
    return versions_to_load_by_policy(model.config, model.version_numbers)


def version_folder(model: ModelEntry, number: int) -> VersionDir | None:
    """The folder backends read version ``number`` from: always ``str(number)``, whatever Triton parsed."""
    for v in model.versions:
        if v.name == str(number):
            return v
    return None


class Listed(NamedTuple):
    """A file directly in one of a model's version folders, as the scan listed it."""

    text: str  # its path
    entry: FileEntry
    plain: bool  # neither the version folder nor the file is a symlink: the path lies inside the model folder


def listed_file(model: ModelEntry, path: Path) -> Listed | None:
    """The scan's entry for ``path`` when it names a file directly in one of the model's version folders,
    else None (a folder, a file deeper down, a path elsewhere)."""
    text = str(path)  # strings: pathlib's parents and comparisons cost more than the lookup itself
    above, name = os.path.split(text)
    model_folder, folder = os.path.split(above)
    if model_folder != str(model.path):
        return None
    v = next((v for v in model.versions if v.name == folder), None)
    entry = v.entry(name) if v is not None else None
    if entry is None or entry.is_dir:
        return None
    return Listed(text, entry, link_free(model, folder, entry))


def link_free(model: ModelEntry, folder: str, entry: FileEntry) -> bool:
    """``Listed.plain`` of ``entry`` in version folder ``folder``: neither the folder nor the file is a link."""
    if entry.link:
        return False
    for f in model.files:
        if f.name == folder:
            return not f.link
    return False


def content_key(model: ModelEntry, path: Path, listed: Listed | None = None) -> tuple[str, int, int] | None:
    """``(path, size, modification time)`` from the scan's stat of a file directly in one of the model's
    version folders, for what is derived from its content; None for anything else (a folder, a link out,
    a file deeper down). ``listed``: ``listed_file(model, path)`` when the caller has it."""
    if listed is None:
        listed = listed_file(model, path)
    return None if listed is None else entry_key(listed.text, listed.entry)


def entry_key(text: str, entry: FileEntry) -> tuple[str, int, int] | None:
    """``content_key`` for a file the caller found in a version folder's listing itself (``text``: its path),
    without looking the path up again."""
    if entry.escapes or entry.size is None or entry.mtime_ns is None:
        return None
    return (text, entry.size, entry.mtime_ns)


def is_unlistable(problem: str | None) -> bool:
    """Whether a model's scan problem means its folder could not be listed at all."""
    return problem is not None and problem.startswith("cannot list")


def misplaced_configs(model: ModelEntry) -> tuple[str, ...]:
    """Version folders holding a ``config.pbtxt``, which Triton never reads there (tutorials publish so)."""
    return tuple(v.name for v in model.versions if v.has(CONFIG_FILE))


def misplaced_config_hint(model: ModelEntry) -> str | None:
    """The hint for a model whose config sits in a version folder, or None."""
    folders = misplaced_configs(model)
    if not folders:
        return None
    return (
        f"{CONFIG_FILE} belongs in the model folder, not the version folder: move "
        f"{model.name}/{folders[0]}/{CONFIG_FILE} to {model.name}/{CONFIG_FILE}"
    )


class ListingSummary(NamedTuple):
    """One pass over the names the scan listed in a model folder and its version folders."""

    utf8: bool  # every name is UTF-8 text (no surrogate escapes): RB104 finds no file name
    links_ok: bool  # no entry is a symlink leaving the repository or a broken one: RB103 finds no link


def listing_summary(model: ModelEntry) -> ListingSummary:
    """``ListingSummary`` of the model's listing, kept on the entry."""
    return model_fact(model, listing_summary, _summarize_listing)


_PLAIN = ListingSummary(True, True)


def _summarize_listing(model: ModelEntry) -> ListingSummary:
    if model.plain_listing:  # the scan saw no link and only ASCII names
        return _PLAIN
    entries = [*model.files, *(f for v in model.versions for f in v.files)]
    try:
        "".join(f.name for f in entries).encode("utf-8")
        utf8 = True
    except UnicodeEncodeError:
        utf8 = False
    return ListingSummary(utf8, not any(f.escapes or f.broken for f in entries))
