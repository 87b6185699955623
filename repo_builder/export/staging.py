"""Write export results into a hidden staging folder inside the output folder, then rename them into place.

An interrupted export leaves the previous files (or none), never a half-written ONNX beside a signature
that describes something else. ``signature.json`` is moved last: it is what later stages read first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from repo_builder.errors import UserError
from repo_builder.spec import SIGNATURE_FILE


def prepare_out_dir(out_dir: Path) -> Path:
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir}: exists and is not a folder; choose a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out {out_dir}: cannot create the folder ({exc.strerror or exc})") from None
    return out_dir


@contextlib.contextmanager
def staged_output(out_dir: Path) -> Iterator[Path]:
    """Yield an empty staging folder; on success move its entries into ``out_dir``, on failure drop it."""
    created = not Path(out_dir).exists()
    out_dir = prepare_out_dir(out_dir)
    staging = Path(tempfile.mkdtemp(prefix=".export-staging-", dir=out_dir))
    try:
        yield staging
        publish_staged(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created:  # a failed first export leaves no empty folder behind
            with contextlib.suppress(OSError):
                out_dir.rmdir()
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def publish_staged(staging: Path, out_dir: Path) -> None:
    entries = sorted(staging.iterdir(), key=lambda p: (p.name == SIGNATURE_FILE, p.name))
    for entry in entries:
        target = out_dir / entry.name
        if entry.is_dir():
            # Folders cannot be replaced atomically: park the old one inside the staging folder (removed with it).
            if target.exists() or target.is_symlink():
                os.replace(target, staging / f".old-{entry.name}")
            os.replace(entry, target)
        else:
            if target.is_dir() and not target.is_symlink():
                os.replace(target, staging / f".old-{entry.name}")
            os.replace(entry, target)
