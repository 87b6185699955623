"""Write export results into a hidden staging folder inside the output folder, then rename them into place.

An interrupted export leaves the previous files (or none), never a half-written ONNX beside a signature
that describes something else. ``signature.json`` is moved last: it is what later stages read first.
The staging folder's name carries the exporter's PID, so the next export removes the ones that killed
exports left (an export folder is not a Triton repository: a hidden folder there is harmless meanwhile).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from repo_builder.fsutil import move_into_place, pid_alive, prepare_out_dir, staging_folder
from repo_builder.spec import SIGNATURE_FILE

STAGING_MARK = ".export-staging-"


def remove_dead_stagings(out_dir: Path) -> list[Path]:
    """Staging folders of exports whose process is gone (``.export-staging-<pid>-*``)."""
    removed = []
    for folder in sorted(out_dir.glob(STAGING_MARK + "*")):
        pid = folder.name[len(STAGING_MARK) :].split("-", 1)[0]
        if folder.is_dir() and not folder.is_symlink() and pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


@contextlib.contextmanager
def staged_output(out_dir: Path) -> Iterator[Path]:
    """Yield an empty staging folder; on success move its entries into ``out_dir``, on failure drop it."""
    created = not Path(out_dir).exists()
    out_dir = prepare_out_dir(out_dir)
    remove_dead_stagings(out_dir)
    try:
        with staging_folder(out_dir, f"{STAGING_MARK}{os.getpid()}-") as staging:
            yield staging
            move_into_place(staging, out_dir, last=(SIGNATURE_FILE,))
    except BaseException:
        if created:  # a failed first export leaves no empty folder behind
            with contextlib.suppress(OSError):
                out_dir.rmdir()
        raise
