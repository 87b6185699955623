"""Where a build works: a hidden stage folder BESIDE ``--out``, under the repository's lock.

Triton treats every folder of a repository as a model, hidden or not, so nothing a build writes may sit
inside ``--out`` until it is whole and checked. The stage ``.<out-name>.repo-builder-stage-<pid>`` lives
in ``--out``'s parent (same filesystem, so moving into place is renaming). A killed build leaves its stage
behind; the next build removes it once it holds the lock, which proves no build of that ``--out`` is still
running (stronger than a PID check, which PID reuse defeats; the PID in the name says who left it).

SIGTERM (what CI sends on cancel) is turned into the same ``KeyboardInterrupt`` as SIGINT for the duration
of a build, so both unwind alike: the stage is removed, the lock released, folders the build created and
left empty are removed again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from repo_builder.errors import UserError
from repo_builder.repository.lock import repository_lock
from repo_builder.safe_paths import refuse_system_folder
from repo_builder.signals import interrupt_on_termination

STAGE_MARK = ".repo-builder-stage-"
Log = Callable[[str], None]


def stage_prefix(out: Path) -> str:
    return f".{out.name}{STAGE_MARK}"


@dataclass(frozen=True)
class Stage:
    """A build's stage folder (``root``) for the repository ``out``."""

    out: Path
    root: Path

    @property
    def models(self) -> Path:
        """``<name>/config.pbtxt`` and ``<name>/<version>/`` of every model this build writes."""
        return self.root / "models"

    @property
    def preview(self) -> Path:
        """A hard-linked copy of ``out`` on which the moves are rehearsed and each state validated."""
        return self.root / "preview"

    @property
    def parked(self) -> Path:
        """Version folders a ``--force`` build replaced (removed with the stage)."""
        return self.root / "parked"


def _stage_pid(stage: Path, prefix: str) -> str:
    return stage.name[len(prefix) :] or "?"


def remove_stale_stages(out: Path, log: Log | None = None) -> list[Path]:
    """Remove the stages killed builds left (call it holding the lock: then every stage found is stale).

    Also removes ``.repo-builder-stage-*`` folders that builds of older repo-builder versions staged
    INSIDE the repository, where Triton saw them as models.
    """
    prefix = stage_prefix(out)
    candidates = sorted(out.parent.glob(glob_escape(prefix) + "*"))
    if out.is_dir() and not out.is_symlink():
        candidates += sorted(out.glob(STAGE_MARK + "*")) + sorted(out.glob("*/" + STAGE_MARK + "*"))
    removed = []
    for stage in candidates:
        if stage.is_dir() and not stage.is_symlink():
            shutil.rmtree(stage, ignore_errors=True)
            removed.append(stage)
            if log is not None:
                log(f"removed {stage}, left by a killed build (PID {_stage_pid(stage, prefix)})")
    return removed


def glob_escape(text: str) -> str:
    """``text`` with glob's special characters made literal (a folder may be called ``models[1]``)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _make_parents(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; the ones created, outermost first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()][::-1]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out: cannot create the folder {folder} ({exc.strerror or exc})") from None
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    for folder in reversed(folders):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty: a failed build leaves no empty --out (or parents) behind


def _check_out(out: Path) -> None:
    refuse_system_folder(out, "--out")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a folder; choose a folder")


def _check_same_filesystem(root: Path, out: Path) -> None:
    if out.exists() and os.stat(root).st_dev != os.stat(out).st_dev:
        raise UserError(
            f"--out {out}: is a mount point (another filesystem than {out.parent}); a build stages beside --out "
            f"and renames into it, so pass a folder inside it (for example {out / 'models'})"
        )


@contextlib.contextmanager
def _locked_stage(out: Path, log: Log | None) -> Iterator[Stage]:
    with repository_lock(out), contextlib.ExitStack() as cleanup:
        remove_stale_stages(out, log)
        root = out.parent / f"{stage_prefix(out)}{os.getpid()}"
        try:
            root.mkdir()
        except OSError as exc:
            raise UserError(f"--out {out}: cannot create the stage folder {root} ({exc.strerror})") from None
        cleanup.callback(shutil.rmtree, root, ignore_errors=True)
        _check_same_filesystem(root, out)
        yield Stage(out, root)


@contextlib.contextmanager
def build_stage(out: Path, log: Log | None = None) -> Iterator[Stage]:
    """Lock ``out``, sweep stale stages, and yield a fresh stage beside it; everything undone on leaving."""
    # A symlinked --out is staged beside its target: renames must stay on the target's filesystem, and
    # a first build's rename must fill the folder, not replace the link.
    out = Path(os.path.realpath(out))
    _check_out(out)
    with interrupt_on_termination():
        created = _make_parents(out.parent)
        try:
            with _locked_stage(out, log) as stage:
                yield stage
        except BaseException:
            # --out itself is only ever created whole, by the last rename of a successful first build.
            _remove_if_empty(created)
            raise
