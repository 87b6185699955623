"""Atomic writing of rendered models into a repository.

Everything is first written to a staging folder INSIDE the output folder (same filesystem, so the final
moves are renames), then moved into place one model at a time, members before the ensemble that calls
them. Every intermediate state is a repository Triton loads:

- a model folder that does not exist yet appears whole, with one rename;
- a new version folder of an existing model appears whole, with one rename; an existing version is
  replaced (``--force``) by an atomic exchange (Linux ``renameat2(RENAME_EXCHANGE)``) where available;
- ``config.pbtxt`` is replaced with ``os.replace``.

The staging folder lives inside an existing model folder when there is one: there a leftover from a
killed build is a non-numeric version folder, which Triton skips with a warning. (Directly in the
repository, any folder is a model to Triton, hidden or not.) Leftovers are removed by the next build.

``REPO_BUILDER_COMMIT_PAUSE`` (seconds) sleeps between the moves: crash tests use it to kill a build
while it is moving models into place.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from repo_builder.errors import UserError
from repo_builder.fsutil import prepare_out_dir, sha256_file, staging_folder
from repo_builder.render.rendered import RenderedModel

STAGE_PREFIX = ".repo-builder-stage-"
OWNER_FILE = "owner.pid"
CONFIG_FILE = "config.pbtxt"
# What each platform/backend loads from a version folder, to order a version and config swap safely.
_MODEL_FILES = {"python": "model.py", "onnxruntime_onnx": "model.onnx", "tensorrt_plan": "model.plan"}


@dataclass(frozen=True)
class StagedModel:
    """A model written into the staging folder, ready to move into the repository."""

    name: str
    role: str
    version: int
    folder: Path  # <stage>/models/<name>: config.pbtxt and <version>/
    files: Mapping[str, str]  # path relative to the version folder -> sha256
    config_sha256: str

    @property
    def version_dir(self) -> Path:
        return self.folder / str(self.version)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_stale(stage: Path) -> bool:
    try:
        pid = int((stage / OWNER_FILE).read_text().strip())
    except (OSError, ValueError):
        # No owner recorded (killed before writing it): stale once it is a minute old.
        try:
            return time.time() - stage.stat().st_mtime > 60
        except OSError:
            return False
    return pid != os.getpid() and not _pid_alive(pid)


def remove_stale_stages(out: Path) -> list[Path]:
    """Remove staging folders that killed builds left in the repository root or in model folders."""
    removed = []
    candidates = list(out.glob(STAGE_PREFIX + "*")) + list(out.glob("*/" + STAGE_PREFIX + "*"))
    for stage in candidates:
        if stage.is_dir() and not stage.is_symlink() and _is_stale(stage):
            shutil.rmtree(stage, ignore_errors=True)
            removed.append(stage)
    return removed


def _stage_parent(out: Path, prefer: Sequence[str]) -> Path:
    """An existing model folder of this build (or any model folder) when there is one, else the root."""
    for name in prefer:
        if (out / name / CONFIG_FILE).is_file() and not (out / name).is_symlink():
            return out / name
    for child in sorted(out.iterdir()):
        if child.is_dir() and not child.is_symlink() and (child / CONFIG_FILE).is_file():
            return child
    return out


@contextlib.contextmanager
def staging_area(out: Path, prefer: Sequence[str] = ()) -> Iterator[Path]:
    """Create ``out`` if needed and a fresh staging folder inside it; always removed afterwards."""
    prepare_out_dir(out)
    with contextlib.ExitStack() as stack:
        try:
            remove_stale_stages(out)
            root = stack.enter_context(staging_folder(_stage_parent(out, prefer), STAGE_PREFIX))
        except PermissionError as exc:
            raise UserError(f"--out {out}: cannot write there ({exc.strerror})") from None
        (root / OWNER_FILE).write_text(f"{os.getpid()}\n")
        yield root


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def stage_model(stage: Path, model: RenderedModel) -> StagedModel:
    """Write one rendered model into ``<stage>/models/<name>``; files already inside the stage are moved."""
    folder = stage / "models" / model.name
    version_dir = folder / str(model.version)
    version_dir.mkdir(parents=True)
    config = model.config_text.encode("utf-8")
    (folder / CONFIG_FILE).write_bytes(config)
    hashes: dict[str, str] = {}
    for rel, content in model.files.items():
        target = version_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
            hashes[rel] = hashlib.sha256(content).hexdigest()
            continue
        source = Path(content)
        if not source.is_file():
            raise UserError(f"{source}: missing; it should go into {model.name}/{model.version}/{rel}")
        if _inside(source, stage):
            os.rename(source, target)  # export/compile output made in the stage: a rename, not a copy
        else:
            shutil.copyfile(source, target)
        hashes[rel] = sha256_file(target)
    return StagedModel(model.name, model.role, model.version, folder, hashes, hashlib.sha256(config).hexdigest())


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False when unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


def _config_first(target: Path, staged: StagedModel) -> bool:
    """Replace config.pbtxt before the version when the new version lacks what the OLD config loads."""
    try:
        old = (target / CONFIG_FILE).read_text(encoding="utf-8")
    except OSError:
        return False
    from repo_builder.render.parse_back import parse_config

    try:
        config = parse_config(old, str(target / CONFIG_FILE))
    except UserError:
        return True  # the old config is broken anyway: the new one cannot make it worse
    kind = config.backend or config.platform
    needed = config.default_model_filename or _MODEL_FILES.get(kind)
    return bool(needed) and not (staged.version_dir / needed).exists()


def _pause() -> None:
    pause = float(os.environ.get("REPO_BUILDER_COMMIT_PAUSE", "0") or 0)
    if pause > 0:
        time.sleep(pause)


def commit_models(out: Path, staged: Sequence[StagedModel], *, force: bool) -> None:
    """Move staged models into ``out`` in the given order (members before their ensemble)."""
    for model in staged:
        _pause()
        target = out / model.name
        if not target.exists():
            os.rename(model.folder, target)
            continue
        if not target.is_dir():
            raise UserError(f"{target}: exists and is not a model folder; remove it or choose another --name")
        version_target = target / str(model.version)
        config_first = _config_first(target, model)
        if config_first:
            os.replace(model.folder / CONFIG_FILE, target / CONFIG_FILE)
            _pause()
        if version_target.exists() or version_target.is_symlink():
            if not force:
                raise UserError(f"{version_target}: version already exists; pass --force to replace it")
            if not _exchange(model.version_dir, version_target):
                old = model.folder / f"replaced-{model.version}"
                os.rename(version_target, old)
                os.rename(model.version_dir, version_target)
        else:
            os.rename(model.version_dir, version_target)
        if not config_first:
            _pause()
            os.replace(model.folder / CONFIG_FILE, target / CONFIG_FILE)
