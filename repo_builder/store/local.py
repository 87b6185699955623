"""The local side of a store: laying a listing out below a folder (validate's mirror) and downloading
objects into one (pull). Every local path is built through ``safe_paths.inside``: a key such as
``prefix//etc/passwd`` or ``../x`` is never written (validate reports it as RB007, pull refuses).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from repo_builder.errors import RefusedError
from repo_builder.safe_paths import inside
from repo_builder.store.fsspec_store import Listing, ObjectStore
from repo_builder.store.publish_record import PUBLISH_STATE_FILE

# (relative key, listed size) -> whether to download it; else an empty file, or a sparse one of the listed size
Wanted = Callable[[str, int], bool]
Sparse = Callable[[str], bool]


def lay_out(root: Path, listing: Listing, wanted: Wanted, sparse: Sparse) -> list[tuple[str, Path]]:
    """Create the listing's folders and files under ``root`` (object stores have no empty folders, so
    a folder exists only through a key below it or an explicit ``folder/`` marker, as Triton sees it);
    return the (relative, local) pairs to download. Files not wanted stay empty, or ``sparse`` ones get
    the listed size without a byte read."""
    fetch = []
    for folder in sorted(listing.folders):
        try:
            inside(root, folder).mkdir(parents=True, exist_ok=True)
        except ValueError:
            continue  # '/etc', '..': reported as RB007, never created
        except OSError:
            continue  # a folder key that is also a file: Triton cannot use it either
    for relative, info in sorted(listing.files.items()):
        try:
            target = inside(root, relative)
        except ValueError:
            continue  # '//etc/passwd', '../x': reported as RB007, never written
        if relative == PUBLISH_STATE_FILE:
            continue
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if wanted(relative, info.size):
                target.touch()
                fetch.append((relative, target))
            elif sparse(relative):
                with open(target, "wb") as fh:  # sparse: a scan sees the size, nothing is read
                    fh.truncate(info.size)
            else:
                target.touch()
        except OSError:
            continue  # a key that cannot be a local path (a "file" that is also a folder): skip it
    return fetch


def download_into(store: ObjectStore, root: Path, relatives: list[str]) -> None:
    """Download ``relatives`` below ``root``; a key that would leave ``root`` refuses the whole download."""
    pairs = []
    for relative in relatives:
        try:
            target = inside(root, relative)
        except ValueError as exc:
            raise RefusedError(f"{store.url_of(relative)}: {exc}, which would leave the target folder; refusing it") from None
        target.parent.mkdir(parents=True, exist_ok=True)
        pairs.append((relative, target))
    store.get_files(pairs)
