"""What a measurement ran on, written beside its figures: repository digest, machine, date.

The repository digest is the sha256 of every regular file's relative path and sha256, in sorted order:
two runs with the same digest measured the same bytes. ``__pycache__`` folders are left out (Triton's
Python stub writes them into version folders while it serves), and so are links (never followed).
"""

from __future__ import annotations

import hashlib
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from repo_builder.compat import UTC
from repo_builder.fsutil import sha256_file
from repo_builder.gpu import detect_gpus


def repository_digest(repository: Path) -> str:
    """``sha256:<hex>`` over the repository's files (paths and contents)."""
    digest = hashlib.sha256()
    for path in sorted(_files(repository)):
        digest.update(f"{path.relative_to(repository).as_posix()}\0{sha256_file(path)}\n".encode())
    return f"sha256:{digest.hexdigest()}"


def _files(root: Path) -> list[Path]:
    found: list[Path] = []
    for folder, dirs, names in os.walk(root):  # os.walk does not follow links to folders
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found.extend(p for p in (Path(folder) / n for n in names) if p.is_file() and not p.is_symlink())
    return found


def machine_info() -> dict[str, Any]:
    """Cores this process may use and the GPUs present (names; empty for none)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 0
    return {"cores": cores, "gpus": [g.name for g in detect_gpus()]}


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
