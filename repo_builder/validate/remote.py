"""Validate a repository in an object store (``s3://bucket/prefix``) by mirroring what the rules read.

The listing is mirrored in full (folders and file names, so the layout rules see what Triton sees), but
only small files are downloaded: configs, Python models, labels, sidecars, and ONNX files up to a limit.
Everything else becomes an empty placeholder while the scanned entry keeps its real size, so rules that
need such a file say so instead of misreading it. Object stores have no empty folders: a version folder
without a file in it does not exist there, exactly as Triton sees it (an explicit ``folder/`` marker
object does make it exist, for Triton too).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from repo_builder.errors import UserError
from repo_builder.safe_paths import key_problem
from repo_builder.store.fsspec_store import Listing, ObjectStore, open_store
from repo_builder.store.local import lay_out
from repo_builder.store.publish_record import (
    PUBLISH_STATE_FILE,
    STATE_COMPLETE,
    interrupted_publish,
    read_publish_state,
)
from repo_builder.store.urls import parse_validated_url
from repo_builder.triton_layout import CONFIG_FILE, MAX_PYTHON_BYTES
from repo_builder.validate.engine import check_repository
from repo_builder.validate.records import (
    Diagnostic,
    FileEntry,
    ModelEntry,
    Repository,
    Severity,
    ValidateOptions,
)
from repo_builder.validate.report import Report
from repo_builder.validate.scan import MAX_CONFIG_BYTES, scan_repository

__all__ = [
    "STORE_CODES",
    "RemoteVerdict",
    "check_remote",
    "check_store",
    "mirror_repository",
    "wanted",
]

SMALL_FILE_BYTES = 1 << 20  # labels, sidecars, recipes: always fetched
DEFAULT_MAX_ONNX_BYTES = 16 << 20


def wanted(relative: str, size: int, max_onnx_bytes: int) -> bool:
    """Whether a file is worth downloading for the rules (by name and size)."""
    name = PurePosixPath(relative).name
    if name == CONFIG_FILE:
        return size <= MAX_CONFIG_BYTES
    if name.endswith(".py"):
        return size <= MAX_PYTHON_BYTES
    if name.endswith(".onnx") or "model.onnx/" in relative:
        return size <= max_onnx_bytes
    return size <= SMALL_FILE_BYTES


def _sparse(relative: str) -> bool:
    """A config too large to fetch is laid out at its size: the scan reports it without reading it."""
    return PurePosixPath(relative).name == CONFIG_FILE


@contextmanager
def mirror_store(
    store: ObjectStore, listing: Listing | None = None, max_onnx_bytes: int = DEFAULT_MAX_ONNX_BYTES
) -> Iterator[Repository]:
    """Scan the repository below ``store``'s prefix through a temporary local mirror (removed on exit)."""
    url = store.location.url
    listing = listing or store.listing()
    if not listing.files and not listing.folders:
        raise UserError(f"{url}: no objects under this prefix (is the URL right?)")
    tmp = Path(tempfile.mkdtemp(prefix="repo-builder-mirror-"))
    try:
        root = tmp / "repository"
        root.mkdir()
        store.get_files(lay_out(root, listing, partial(wanted, max_onnx_bytes=max_onnx_bytes), _sparse))
        repository = scan_repository(root)
        sizes = {r: f.size for r, f in listing.files.items()}
        yield _with_remote_sizes(repository, url, sizes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def mirror_repository(
    url: str, endpoint_url: str | None = None, max_onnx_bytes: int = DEFAULT_MAX_ONNX_BYTES
) -> Iterator[Repository]:
    """Scan an ``s3://`` repository through a temporary local mirror (removed on exit).

    The scanned ``Repository`` has ``location`` = ``url`` and the remote sizes in its file entries.
    """
    store = open_store(parse_validated_url(url, endpoint_url))
    with mirror_store(store, max_onnx_bytes=max_onnx_bytes) as repository:
        yield replace(repository, location=url)


@dataclass(frozen=True)
class StoreCode:
    """A code for what the store itself shows (its publish record against its listing), not a rule on the
    files: the offline rules cannot see a truncated object they do not download."""

    code: str
    rule: str
    severity: Severity
    doc: str


PUBLISH_INTERRUPTED = StoreCode(
    "RB003",
    "publish-interrupted",
    Severity.ERROR,
    f"The repository's publish record ({PUBLISH_STATE_FILE}) says a ``repo-builder publish`` into it did "
    "not finish: the store may mix old and new files, which the rules can pass one by one while the "
    "whole was never tested. Run the publish again.",
)
PUBLISHED_FILE_CHANGED = StoreCode(
    "RB004",
    "published-file-changed",
    Severity.ERROR,
    "A file the last complete ``repo-builder publish`` uploaded is missing from the store, or has another "
    "size than the one uploaded (a truncated upload, a hand edit). Publish again.",
)
UNSAFE_KEY = StoreCode(
    "RB007",
    "store-key-unsafe",
    Severity.ERROR,
    "An object's key below the repository's prefix is not a plain relative path: it starts with '/' "
    "(``prefix//etc/passwd``), or holds an empty, ``.`` or ``..`` part or a NUL byte. Written to "
    "a local folder it would land outside it, so ``validate s3://`` and ``pull`` never write it (``pull`` "
    "refuses the repository); what a server does with it depends on its store client. Delete the object.",
)
STORE_CODES: tuple[StoreCode, ...] = (PUBLISH_INTERRUPTED, PUBLISHED_FILE_CHANGED, UNSAFE_KEY)


@dataclass(frozen=True)
class StoreProblem:
    """One store-level problem: a line for logs (``problems()``) and a diagnostic for reports."""

    kind: StoreCode
    path: str  # relative to the repository's prefix
    message: str
    hint: str
    url: str  # the repository's URL, for the one-line form

    @property
    def line(self) -> str:
        return f"{self.url}/{self.path}: {self.message}; {self.hint}"

    def diagnostic(self) -> Diagnostic:
        return Diagnostic(self.kind.code, self.kind.rule, self.kind.severity, self.message, self.path, hint=self.hint)


@dataclass(frozen=True)
class RemoteVerdict:
    """The offline report on a remote repository, and what its publish record says about the store."""

    report: Report  # the offline rules on the mirrored files
    store: tuple[StoreProblem, ...] = ()  # an interrupted publish, files missing or of another size

    @property
    def interrupted(self) -> str | None:
        """The sentence saying a publish did not finish, when its record is not "complete"."""
        return next((p.message + "; " + p.hint for p in self.store if p.kind is PUBLISH_INTERRUPTED), None)

    @property
    def mismatches(self) -> tuple[str, ...]:
        """Files missing or of another size than the last publish recorded, one line each."""
        return tuple(p.line for p in self.store if p.kind is PUBLISHED_FILE_CHANGED)

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.store

    def problems(self) -> list[str]:
        """The store-level problems, one line each (the report's diagnostics are separate)."""
        return ([self.interrupted] if self.interrupted else []) + list(self.mismatches)

    def full_report(self) -> Report:
        """The report with the store-level problems as repository-level diagnostics, first: what
        ``validate s3://...`` prints, and its exit code."""
        extra = tuple(p.diagnostic() for p in self.store)
        return replace(self.report, diagnostics=extra + self.report.diagnostics) if extra else self.report


def interrupted_problem(url: str, state: dict[str, Any] | None) -> tuple[StoreProblem, ...]:
    """The publish record's complaint, when it says a publish did not finish."""
    sentence = interrupted_publish(state)
    if sentence is None:
        return ()
    message, _, hint = sentence.rpartition("; ")
    return (StoreProblem(PUBLISH_INTERRUPTED, PUBLISH_STATE_FILE, message or sentence, hint, url),)


def unsafe_keys(url: str, listing: Listing) -> tuple[StoreProblem, ...]:
    """Keys that would leave a local folder if written below it (never written: see ``store.local.lay_out``)."""
    out = []
    for relative in sorted(set(listing.files) | listing.folders):
        problem = key_problem(relative)
        if problem is not None:
            shown = relative.encode("unicode_escape").decode("ascii")
            out.append(StoreProblem(UNSAFE_KEY, shown, f"the key holds {problem}", "delete the object", url))
    return tuple(out)


def record_mismatches(url: str, state: dict[str, Any] | None, listing: Listing) -> tuple[StoreProblem, ...]:
    """Files the last complete publish recorded that are now missing or of another size (a truncated
    upload, a hand edit): the offline rules cannot see these when they do not download the file."""
    if state is None or state.get("state") != STATE_COMPLETE or not isinstance(state.get("files"), dict):
        return ()
    out = []
    for relative, recorded in sorted(state["files"].items()):
        size = recorded.get("size") if isinstance(recorded, dict) else None
        remote = listing.files.get(relative)
        if remote is None:
            message = "missing, but the last publish uploaded it"
        elif size is not None and remote.size != size:
            message = f"{remote.size} bytes, but the last publish uploaded {size}"
        else:
            continue
        out.append(StoreProblem(PUBLISHED_FILE_CHANGED, relative, message, "publish again", url))
    return tuple(out)


Judge = Callable[[Repository, ValidateOptions | None], Report]


def check_store(
    store: ObjectStore,
    options: ValidateOptions | None = None,
    max_onnx_bytes: int = DEFAULT_MAX_ONNX_BYTES,
    judge: Judge = check_repository,
) -> RemoteVerdict:
    """Judge the repository below ``store``'s prefix (with ``judge``, while its mirror exists), and read
    its publish record."""
    listing = store.listing()
    state = read_publish_state(store, listing)
    url = store.location.url
    problems = unsafe_keys(url, listing) + interrupted_problem(url, state) + record_mismatches(url, state, listing)
    with mirror_store(store, listing, max_onnx_bytes) as repository:
        report = judge(repository, options)
    return RemoteVerdict(report, problems)


def check_remote(
    url: str, endpoint_url: str | None = None, options: ValidateOptions | None = None,
    max_onnx_bytes: int = DEFAULT_MAX_ONNX_BYTES, judge: Judge = check_repository,
) -> RemoteVerdict:
    """``validate s3://...`` as a library call: the report plus what the publish record says. The
    repository's ``location`` is ``url`` as given."""

    def judge_as_named(repository: Repository, opts: ValidateOptions | None) -> Report:
        return judge(replace(repository, location=url), opts)

    return check_store(open_store(parse_validated_url(url, endpoint_url)), options, max_onnx_bytes, judge_as_named)


def _with_remote_sizes(repository: Repository, url: str, sizes: dict[str, int]) -> Repository:
    """Put the listed sizes back on entries whose content was not downloaded."""
    root = repository.root

    def fix(folder: Path, files: tuple[FileEntry, ...]) -> tuple[FileEntry, ...]:
        out = []
        for f in files:
            if not f.is_dir:
                relative = (folder / f.name).relative_to(root).as_posix()
                size = sizes.get(relative)
                if size is not None and size != f.size:
                    f = replace(f, size=size, mtime_ns=None)  # the placeholder's stat describes no content
            out.append(f)
        return tuple(out)

    def fix_model(m: ModelEntry) -> ModelEntry:
        versions = tuple(replace(v, files=fix(v.path, v.files)) for v in m.versions)
        return replace(m, files=fix(m.path, m.files), versions=versions)

    return replace(repository, models=tuple(fix_model(m) for m in repository.models), location=url)
