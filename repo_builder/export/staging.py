"""Write export results into a hidden staging folder inside the output folder, then rename them into place.

An interrupted export leaves the previous files (or none), never a half-written ONNX beside a signature
that describes something else. ``signature.json`` is moved last: it is what later stages read first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from repo_builder.fsutil import move_into_place, prepare_out_dir, staging_folder
from repo_builder.spec import SIGNATURE_FILE


@contextlib.contextmanager
def staged_output(out_dir: Path) -> Iterator[Path]:
    """Yield an empty staging folder; on success move its entries into ``out_dir``, on failure drop it."""
    created = not Path(out_dir).exists()
    out_dir = prepare_out_dir(out_dir)
    try:
        with staging_folder(out_dir, ".export-staging-") as staging:
            yield staging
            move_into_place(staging, out_dir, last=(SIGNATURE_FILE,))
    except BaseException:
        if created:  # a failed first export leaves no empty folder behind
            with contextlib.suppress(OSError):
                out_dir.rmdir()
        raise
