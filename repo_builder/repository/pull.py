"""Pull a repository from an object store into a local folder, whole or not at all.

Only what Triton would load comes down unless ``--all``: each model's ``config.pbtxt`` and own files
(labels ...), the folders Triton reads besides versions (``warmup``, ``initial_state``, ``configs``) and
the version folders its version policy loads. Files land in a staging folder beside the target, are
checked against the store's listing (and the sha256 recorded at publish), validated, and only then
renamed into place: a reader of the target never sees a half-pulled repository.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from repo_builder.errors import RefusedError, UserError
from repo_builder.fsutil import sha256_file
from repo_builder.safe_paths import refuse_system_folder
from repo_builder.store.fsspec_store import Listing, ObjectStore, open_store
from repo_builder.store.local import download_into
from repo_builder.store.publish_record import PUBLISH_STATE_FILE
from repo_builder.store.urls import StoreUrl, parse_store_url
from repo_builder.triton_layout import SKIPPED_VERSION_FOLDERS
from repo_builder.validate.analysis.versions import versions_to_load
from repo_builder.validate.engine import check_repository
from repo_builder.validate.records import Repository, Severity, ValidateOptions
from repo_builder.validate.remote import mirror_store, unsafe_keys
from repo_builder.validate.report import Report
from repo_builder.validate.reporters.formatting import format_diagnostic
from repo_builder.validate.scan import scan_repository

Log = Callable[[str], None]


@dataclass(frozen=True)
class PullOptions:
    all_files: bool = False  # every object, not only what Triton loads
    replace: bool = False  # replace a target folder that is not empty
    force: bool = False  # move a repository the validator refuses into place anyway
    validate: ValidateOptions = field(default_factory=ValidateOptions)
    attempts: int = 4


@dataclass(frozen=True)
class PullResult:
    out_dir: Path
    files: tuple[str, ...]
    total_bytes: int
    report: Report


def _loaded_prefixes(repository: Repository) -> tuple[set[str], set[str]]:
    """(model folders taken whole, '<model>/<folder>' prefixes Triton reads) from the scanned mirror."""
    whole: set[str] = set()
    folders: set[str] = set()
    for model in repository.models:
        if model.config is None:
            whole.add(model.name)  # nothing to decide by: let the validator judge all of it
            continue
        folders.update(f"{model.name}/{name}" for name in SKIPPED_VERSION_FOLDERS)
        folders.update(f"{model.name}/{number}" for number in versions_to_load(model))
    return whole, folders


def select_files(listing: Listing, repository: Repository, all_files: bool) -> list[str]:
    """The objects to download (relative paths), sorted."""
    names = sorted(r for r in listing.files if r != PUBLISH_STATE_FILE)
    if all_files:
        return names
    whole, folders = _loaded_prefixes(repository)
    out = []
    for relative in names:
        parts = PurePosixPath(relative).parts
        if len(parts) < 2:
            continue  # a file at the root is not part of any model
        if parts[0] in whole or len(parts) == 2 or f"{parts[0]}/{parts[1]}" in folders:
            out.append(relative)
    return out


def _check_target(out_dir: Path, replace: bool) -> None:
    refuse_system_folder(out_dir, "pull target")
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"{out_dir}: exists and is not a folder; choose a folder to pull into")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not replace:
        raise UserError(f"{out_dir}: the folder is not empty; choose a new folder or pass --replace")
    if not out_dir.parent.is_dir():
        raise UserError(f"{out_dir}: the folder {out_dir.parent} does not exist; create it first")


def _verify(store: ObjectStore, stage: Path, relatives: list[str], listing: Listing) -> None:
    """Every downloaded file has the listed size and, when the publish recorded one, its sha256."""
    for relative in relatives:
        local = stage.joinpath(*PurePosixPath(relative).parts)
        expected = listing.files[relative].size
        if local.stat().st_size != expected:
            raise RefusedError(f"{store.url_of(relative)}: downloaded {local.stat().st_size} bytes of {expected}; pull again")
        recorded = store.sha256(relative)
        if recorded is not None and recorded != sha256_file(local):
            raise RefusedError(
                f"{store.url_of(relative)}: its content does not match the sha256 recorded when it was "
                "published (changed or truncated in the store); publish it again"
            )


def _swap_into_place(stage: Path, out_dir: Path) -> None:
    """Rename the staged repository to ``out_dir``; an old one is parked beside it and removed after."""
    if out_dir.is_dir() and not any(out_dir.iterdir()):
        out_dir.rmdir()
    if not out_dir.exists():
        os.replace(stage, out_dir)
        return
    parked = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.replace(out_dir, parked / out_dir.name)
    os.replace(stage, out_dir)
    shutil.rmtree(parked, ignore_errors=True)


def _judge(stage: Path, options: PullOptions, url: str, log: Log) -> Report:
    report = check_repository(scan_repository(stage), options.validate)
    for d in report.diagnostics:
        if d.severity != Severity.INFO:
            log(f"  {format_diagnostic(d)}")
    if not report.ok and not options.force:
        raise RefusedError(f"{url}: the pulled repository does not validate (see above); nothing was moved into place")
    return report


def pull_repository(
    location: StoreUrl | str, out_dir: Path | str, options: PullOptions | None = None, log: Log = lambda _line: None
) -> PullResult:
    """Download ``location`` into ``out_dir`` (staged beside it, checked, validated, renamed in).

    ``location``: ``parse_store_url(url, endpoint_url)``, or a URL string (the endpoint then comes from the
    URL or ``$AWS_ENDPOINT_URL``). Raises ``RefusedError`` when the pulled repository does not validate
    (nothing is moved into place) unless ``force``, ``UserError`` for a bad target folder or URL.
    """
    location = parse_store_url(location) if isinstance(location, str) else location
    options = options or PullOptions()
    out_dir = Path(out_dir).absolute()
    _check_target(out_dir, options.replace)
    store = open_store(location, options.attempts)
    listing = store.listing()
    if not listing.files:
        raise UserError(f"{location.url}: no objects under this prefix (is the URL right?)")
    unsafe = unsafe_keys(location.url, listing)
    if unsafe:
        raise RefusedError(f"{unsafe[0].line} (RB007); nothing was written")
    with mirror_store(store, listing, max_onnx_bytes=0) as mirrored:
        relatives = select_files(listing, mirrored, options.all_files)
    total = sum(listing.files[r].size for r in relatives)
    log(f"pull: {len(relatives)} files ({total} bytes) from {location.url}")
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.pull-", dir=out_dir.parent))
    try:
        download_into(store, stage, relatives)
        _verify(store, stage, relatives, listing)
        report = _judge(stage, options, location.url, log)
        _swap_into_place(stage, out_dir)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    log(f"pull: {out_dir} is in place ({len(report.models)} models)")
    return PullResult(out_dir, tuple(relatives), total, report)
