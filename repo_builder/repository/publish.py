"""Publish a local repository to an object store so that a polling Triton never sees a broken state.

Object stores have no folders and no renames, so the order of the uploads is what keeps every state a
polling server can observe loadable:

- models before the ensembles that call them (the validator's judging order);
- in a model: its own files (labels ...), then each version folder, oldest first, the model file itself
  (``model.py``, ``model.onnx`` ...) last in its folder, and ``config.pbtxt`` after all of them;
- a placeholder object in every version folder that would otherwise be empty (the ensemble's ``1/``);
- deletions (``--prune`` only) after every upload, a version's model file first.

A file whose sha256 (kept in the object's metadata) already matches is skipped. A record at the
repository's root says "publishing" while the store changes and "complete" afterwards, so an interrupted
publish is reported by the remote validation instead of passing for a new repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath

from rich.progress import BarColumn, DownloadColumn, TaskID, TransferSpeedColumn
from rich.progress import Progress as Bar

from repo_builder import __version__
from repo_builder.errors import RefusedError, UserError
from repo_builder.fsutil import sha256_file
from repo_builder.repository.manifest import failed_plan_gates, read_manifest
from repo_builder.store.fsspec_store import Listing, ObjectStore, open_store
from repo_builder.store.placeholders import PLACEHOLDER_SHA256, PLACEHOLDER_TEXT, placeholder_key
from repo_builder.store.publish_record import (
    PUBLISH_STATE_FILE,
    STATE_COMPLETE,
    STATE_PUBLISHING,
    read_publish_state,
)
from repo_builder.store.urls import StoreUrl, parse_store_url
from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.validate.engine import check_repository, judging_order
from repo_builder.validate.records import Repository, Severity, ValidateOptions
from repo_builder.validate.remote import RemoteVerdict, check_store
from repo_builder.validate.report import Report
from repo_builder.validate.reporters.formatting import format_diagnostic
from repo_builder.validate.scan import parse_version_name, scan_repository

Log = Callable[[str], None]
# Never published: Python's byte code (the stub writes it), build leftovers.
_SKIPPED_NAMES = frozenset({"__pycache__", ".DS_Store"})
_STAGE_MARK = ".repo-builder-stage-"  # build's staging folders (repository/stage.py), never a model
# REPO_BUILDER_PUBLISH_PAUSE (seconds) sleeps after each change: the kill test uses it to stop a publish
# in the middle.
PAUSE_ENV = "REPO_BUILDER_PUBLISH_PAUSE"


@dataclass(frozen=True)
class LocalFile:
    """A file to publish (``path`` None for a placeholder the store needs but the folder lacks)."""

    relative: str
    size: int
    sha256: str
    path: Path | None = None


@dataclass(frozen=True)
class PublishPlan:
    """What a publish will do, in order; ``skipped`` already match, ``kept`` exist only remotely."""

    location: StoreUrl
    uploads: tuple[LocalFile, ...]
    skipped: tuple[str, ...]
    deletes: tuple[str, ...]
    kept: tuple[str, ...]
    needs_record: bool  # the publish record must be (re)written even without uploads

    @property
    def upload_bytes(self) -> int:
        return sum(f.size for f in self.uploads)

    @property
    def changes(self) -> bool:
        return bool(self.uploads or self.deletes or self.needs_record)

    def lines(self) -> list[str]:
        out = [f"upload {f.relative} ({human_bytes(f.size)})" for f in self.uploads]
        out += [f"delete {r}" for r in self.deletes]
        out += [f"keep   {r} (only in the store; --prune deletes it)" for r in self.kept]
        out.append(
            f"plan: {len(self.uploads)} uploads ({human_bytes(self.upload_bytes)}), {len(self.skipped)} unchanged, "
            f"{len(self.deletes)} deletions, {len(self.kept)} kept remote-only files"
        )
        return out


@dataclass(frozen=True)
class PublishOptions:
    force: bool = False  # publish a repository the validator refuses
    prune: bool = False  # delete remote files the local repository does not have
    dry_run: bool = False
    validate: ValidateOptions = field(default_factory=ValidateOptions)
    attempts: int = 4
    base_delay: float = 0.5


@dataclass(frozen=True)
class PublishResult:
    plan: PublishPlan
    verdict: RemoteVerdict | None  # None after a dry run

    @property
    def triton_url(self) -> str:
        return self.plan.location.triton_url()

    def to_json(self) -> dict[str, object]:
        return {
            "url": self.plan.location.url,
            "model_repository": self.triton_url,
            "environment": list(self.plan.location.triton_environment()),
            "uploaded": [f.relative for f in self.plan.uploads],
            "unchanged": list(self.plan.skipped),
            "deleted": list(self.plan.deletes),
            "kept_remote_only": list(self.plan.kept),
            "dry_run": self.verdict is None,
            "remote_ok": None if self.verdict is None else self.verdict.ok,
            "remote_problems": [] if self.verdict is None else self.verdict.problems(),
        }


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


# -- what to upload, in which order ---------------------------------------------------------------------
def _skipped(name: str) -> bool:
    return name in _SKIPPED_NAMES or _STAGE_MARK in name or name.endswith(".pyc")


def _files_below(folder: Path, root: Path) -> list[Path]:
    """Regular files below ``folder`` (symlinks only when they stay inside ``root``), sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not _skipped(d))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if _skipped(name) or not path.is_file():
                continue
            if path.is_symlink() and not path.resolve().is_relative_to(root.resolve()):
                continue  # the validator refuses it; with --force it is left out, never followed out
            out.append(path)
    return out


def _model_file_last(path: Path, version_dir: Path) -> tuple[bool, str]:
    first = path.relative_to(version_dir).parts[0]
    return (first.startswith("model."), path.as_posix())


def _folder_order(folder: Path) -> tuple[bool, int, str]:
    number, _ = parse_version_name(folder.name)
    return (number is not None, number or 0, folder.name)


def _model_files(model_dir: Path, root: Path) -> list[tuple[Path | None, str]]:
    """(local path or None for a placeholder, relative) in upload order for one model folder."""
    rel = model_dir.relative_to(root).as_posix()
    own = [p for p in sorted(model_dir.iterdir()) if p.is_file() and not _skipped(p.name) and p.name != CONFIG_FILE]
    out: list[tuple[Path | None, str]] = [(p, f"{rel}/{p.name}") for p in own if not p.is_symlink()]
    subfolders = [p for p in model_dir.iterdir() if p.is_dir() and not p.is_symlink() and not _skipped(p.name)]
    for sub in sorted(subfolders, key=_folder_order):
        files = sorted(_files_below(sub, root), key=partial(_model_file_last, version_dir=sub))
        if not files:
            out.append((None, placeholder_key(f"{rel}/{sub.name}")))
        out.extend((p, p.relative_to(root).as_posix()) for p in files)
    config = model_dir / CONFIG_FILE
    if config.is_file():
        out.append((config, f"{rel}/{CONFIG_FILE}"))
    return out


def local_files(root: Path, repository: Repository) -> list[LocalFile]:
    """Every file to publish, in upload order: root files, then models in judging order (members first)."""
    ordered: list[tuple[Path | None, str]] = [
        (p, p.name) for p in sorted(root.iterdir()) if p.is_file() and not p.is_symlink() and not _skipped(p.name)
    ]
    ordered = [(p, r) for p, r in ordered if r != PUBLISH_STATE_FILE]
    for model in judging_order(repository):
        if model.path.is_dir() and not model.path.is_symlink() and not _skipped(model.name):
            ordered.extend(_model_files(model.path, root))
    out = []
    for path, relative in ordered:
        if path is None:
            out.append(LocalFile(relative, len(PLACEHOLDER_TEXT), PLACEHOLDER_SHA256))
        else:
            out.append(LocalFile(relative, path.stat().st_size, sha256_file(path), path))
    return out


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _deletion_order(relative: str) -> tuple[str, int, bool, str]:
    parts = PurePosixPath(relative).parts
    number = parse_version_name(parts[1])[0] if len(parts) > 2 else None
    main_file = len(parts) > 2 and parts[2].startswith("model.")
    return (parts[0], number if number is not None else -1, not main_file, relative)


def newer_remote_versions(plan: PublishPlan, files: list[LocalFile]) -> list[str]:
    """``model/N`` folders kept in the store that are newer than every local version of the model: with
    Triton's default policy (the latest version) the servers keep serving them, not what was published."""
    latest: dict[str, int] = {}
    for f in files:
        parts = PurePosixPath(f.relative).parts
        number = parse_version_name(parts[1])[0] if len(parts) > 2 else None
        if number is not None:
            latest[parts[0]] = max(latest.get(parts[0], -1), number)
    newer = set()
    for relative in plan.kept:
        parts = PurePosixPath(relative).parts
        number = parse_version_name(parts[1])[0] if len(parts) > 2 else None
        if number is not None and parts[0] in latest and number > latest[parts[0]]:
            newer.add(f"{parts[0]}/{parts[1]}")
    return sorted(newer)


def plan_publish(store: ObjectStore, files: list[LocalFile], listing: Listing, prune: bool) -> PublishPlan:
    """Compare local files with the store's: upload what differs, skip what matches (size, then sha256)."""
    uploads, skipped = [], []
    for f in files:
        remote = listing.files.get(f.relative)
        if remote is not None and remote.size == f.size and store.sha256(f.relative) == f.sha256:
            skipped.append(f.relative)
        else:
            uploads.append(f)
    local = {f.relative for f in files}
    extra = sorted((r for r in listing.files if r not in local and r != PUBLISH_STATE_FILE), key=_deletion_order)
    state = read_publish_state(store, listing)
    needs_record = state is None or state.get("state") != STATE_COMPLETE
    return PublishPlan(
        location=store.location,
        uploads=tuple(uploads),
        skipped=tuple(skipped),
        deletes=tuple(extra) if prune else (),
        kept=() if prune else tuple(extra),
        needs_record=needs_record,
    )


# -- doing it ---------------------------------------------------------------------------------------------
def _record(state: str, plan: PublishPlan, files: list[LocalFile] | None = None) -> bytes:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    data: dict[str, object] = {"format": 1, "state": state, "tool": f"repo-builder {__version__}"}
    data["started" if state == STATE_PUBLISHING else "finished"] = now
    if files is not None:
        data["files"] = {f.relative: {"sha256": f.sha256, "size": f.size} for f in files}
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def _pause() -> None:
    pause = float(os.environ.get(PAUSE_ENV) or 0)
    if pause > 0:
        time.sleep(pause)


def execute_plan(store: ObjectStore, plan: PublishPlan, files: list[LocalFile], progress: Progress) -> None:
    """Upload and delete in the plan's order, between a "publishing" and a "complete" record."""
    if not plan.changes:
        return
    record = _record(STATE_PUBLISHING, plan)
    store.put_bytes(record, PUBLISH_STATE_FILE, _sha256_bytes(record))
    progress.begin(len(plan.uploads), plan.upload_bytes)
    for f in plan.uploads:
        if f.path is None:
            store.put_bytes(PLACEHOLDER_TEXT, f.relative, f.sha256)
        else:
            store.put_file(f.path, f.relative, f.sha256)
        progress.advance(f.relative, f.size)
        _pause()
    for relative in plan.deletes:
        store.delete([relative])
        progress.note(f"deleted {relative}")
        _pause()
    progress.end()
    record = _record(STATE_COMPLETE, plan, files)
    store.put_bytes(record, PUBLISH_STATE_FILE, _sha256_bytes(record))


class Progress:
    """Bytes uploaded so far: a rich progress bar on a terminal, plain lines otherwise."""

    def __init__(self, log: Log, tty: bool = False) -> None:
        self.log = log
        self.tty = tty
        self.total_files = self.total_bytes = self.done_files = self.done_bytes = 0
        self._bar: Bar | None = None
        self._task: TaskID | None = None

    def begin(self, files: int, total_bytes: int) -> None:
        self.total_files, self.total_bytes = files, total_bytes
        if self.tty and files:
            self._bar = Bar("{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("uploading", total=total_bytes or 1)

    def advance(self, relative: str, size: int) -> None:
        self.done_files += 1
        self.done_bytes += size
        if self._bar is not None and self._task is not None:  # set together in begin()
            self._bar.update(self._task, advance=size, description=relative)
            return
        self.log(
            f"[{self.done_files}/{self.total_files}] uploaded {relative} ({human_bytes(size)}; "
            f"{human_bytes(self.done_bytes)} of {human_bytes(self.total_bytes)})"
        )

    def note(self, line: str) -> None:
        if self._bar is not None:
            self._bar.console.print(line)
        else:
            self.log(line)

    def end(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        self.log(f"uploaded {self.done_files} files, {human_bytes(self.done_bytes)}")


# -- the whole command -------------------------------------------------------------------------------------
def report_lines(report: Report) -> list[str]:
    """The report's errors and warnings, one line each (infos would drown them in a big repository)."""
    return [format_diagnostic(d) for d in report.diagnostics if d.severity != Severity.INFO]


def validate_local(repo: Path, options: PublishOptions, log: Log) -> Repository:
    """Scan and judge the local repository; refuse it (exit 1) unless ``--force``."""
    if not repo.is_dir():
        raise UserError(f"{repo}: no such folder; pass the model repository to publish")
    repository = scan_repository(repo)
    failed = failed_plan_gates(read_manifest(repo))
    if failed and not options.force:  # docs/precision.md: a plan below its gate is not published
        raise RefusedError(f"{repo}: {', '.join(failed)} failed the accuracy gate when served "
                           "(compile-pending --accuracy-data); rebuild it at another precision or pass --force")
    report = check_repository(repository, options.validate)
    if report.ok:
        log(f"validate: {repo} passes ({len(report.models)} models)")
        return repository
    for line in report_lines(report):
        log(f"  {line}")
    errors = report.count(Severity.ERROR)
    if not options.force:
        raise RefusedError(f"{repo}: the validator refuses it ({errors} errors above); fix them or pass --force")
    log(f"validate: {repo} FAILS ({errors} errors); publishing anyway (--force)")
    return repository


def publish_repository(
    repo: Path | str,
    location: StoreUrl | str,
    options: PublishOptions | None = None,
    log: Log = lambda _line: None,
    tty: bool = False,
) -> PublishResult:
    """Validate ``repo``, upload what changed to ``location`` in a safe order, then validate the remote copy.

    ``location``: ``parse_store_url(url, endpoint_url)``, or a URL string (the endpoint then comes from the
    URL or ``$AWS_ENDPOINT_URL``). ``log`` receives the progress lines the command prints. Raises
    ``RefusedError`` when the local or the published repository does not validate (unless ``force``).
    """
    repo = Path(repo).absolute()  # the scan resolves paths: the file listing must agree with it
    location = parse_store_url(location) if isinstance(location, str) else location
    options = options or PublishOptions()
    problem = location.triton_url_problem()
    if problem:
        log(f"warning: {problem}")
    repository = validate_local(repo, options, log)
    store = open_store(location, options.attempts, options.base_delay)
    files = local_files(repo, repository)
    plan = plan_publish(store, files, store.listing(), options.prune)
    if options.dry_run:
        for line in plan.lines():
            log(line)
        return PublishResult(plan, None)
    for line in plan.lines()[len(plan.uploads) :]:  # uploads are reported as they happen
        log(line)
    execute_plan(store, plan, files, Progress(log, tty))
    verdict = check_store(store, options.validate)
    for line in report_lines(verdict.report):
        log(f"  {line}")
    for problem in verdict.problems():  # an interrupted publish, files missing or of another size
        log(f"remote: {problem}")
    if not verdict.ok:
        message = f"{location.url}: the published repository does not validate (see above)"
        if not options.force:
            raise RefusedError(message + "; fix the local repository and publish again")
        log(f"warning: {message}")
    else:
        log(f"validate: {location.url} passes ({len(verdict.report.models)} models)")
    if plan.kept:
        log(f"note: {len(plan.kept)} files exist only in the store (kept); --prune deletes them")
    for folder in newer_remote_versions(plan, files):
        log(f"warning: {location.url}/{folder} is newer than the published versions and stays the one served; "
            "pass --prune to delete it")
    return PublishResult(plan, verdict)
