"""Stage a copy of a repository that the embedded (Python-backend-only) Triton can load and answer.

The copy lives in a temporary folder, never inside the user's repository: files are hard links (or
symbolic links to the original where hard links cannot cross file systems), so a large ONNX file costs
nothing, and whatever the server writes (the Python stub's ``__pycache__``) lands in the copy. Every file
the stage changes is first unlinked, so nothing is ever written through a link into the original.

Each ONNX Runtime model named in ``stand_ins`` gets ``backend: "python"`` (Triton 2.51 loads
``platform: "onnxruntime_onnx"`` with ``backend: "python"``: measured) and, in each version folder, the
stand-in ``model.py`` (``standin_onnx_model.py``) with a ``standin.json`` naming its ONNX file. For a
server whose steps run on the target image's Python, ``packages`` names the folder holding onnxruntime for
that Python (``image_python.standin_packages``): the stand-in alone puts it on its ``sys.path``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from repo_builder.errors import ToolError
from repo_builder.signals import signals_deferred
from repo_builder.triton import standin_onnx_model
from repo_builder.triton_config import ConfigParseError, parse_config_text
from repo_builder.triton_layout import CONFIG_FILE, SKIPPED_VERSION_FOLDERS

STANDIN_SOURCE = Path(standin_onnx_model.__file__)
DEFAULT_ONNX_FILE = "model.onnx"


@dataclass(frozen=True)
class StandIn:
    """One ONNX Runtime model to serve through the stand-in."""

    name: str  # the model's folder name


@dataclass(frozen=True)
class StagedRepository:
    path: Path  # the copy's root: give this to tritonserver
    stand_ins: tuple[str, ...]  # models served through the stand-in


def _link(source: Path, target: Path) -> None:
    real = source.resolve() if source.is_symlink() else source
    try:
        os.link(real, target)
    except OSError:
        os.symlink(real.absolute(), target)


def _mirror(source: Path, target: Path, seen: frozenset[Path] = frozenset()) -> None:
    """Recreate ``source``'s folders under ``target`` (symlinked ones too, once) and link its files."""
    real = source.resolve()
    if real in seen:
        return  # a symlink back to a folder above: Triton would not get out of it either
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(source.iterdir()):
        dest = target / entry.name
        if entry.is_dir():
            _mirror(entry, dest, seen | {real})
        elif entry.exists():
            _link(entry, dest)


def _replace_file(path: Path, text: str) -> None:
    path.unlink(missing_ok=True)  # never write through a link into the original
    path.write_text(text, encoding="utf-8")


def standin_config(config_text: str | None) -> tuple[str, str] | None:
    """The stand-in's config text and the ONNX file it serves; None when the config does not parse."""
    from google.protobuf import text_format  # with tritonclient: the serve extra

    try:
        config = parse_config_text(config_text or "", CONFIG_FILE)
    except ConfigParseError:
        return None
    onnx_file = config.default_model_filename or DEFAULT_ONNX_FILE
    config.backend = "python"
    if config.platform and config.platform != "onnxruntime_onnx":
        return None
    config.ClearField("default_model_filename")  # the Python backend would load it as model.py
    config.ClearField("cc_model_filenames")
    config.ClearField("runtime")
    return text_format.MessageToString(config), onnx_file


def _version_folders(model: Path) -> Iterable[Path]:
    for entry in sorted(model.iterdir()):
        if entry.is_dir() and entry.name not in SKIPPED_VERSION_FOLDERS and entry.name.isdigit():
            yield entry


def _install_standin(model: Path, packages: Path | None) -> bool:
    config_path = model / CONFIG_FILE
    text = config_path.read_text(encoding="utf-8", errors="replace") if config_path.is_file() else ""
    made = standin_config(text)
    if made is None:
        return False  # the server refuses the config itself: leave it to say so
    config_text, onnx_file = made
    _replace_file(config_path, config_text)
    # An absolute path is fine: the stage is our own temporary folder, read on this machine only.
    settings = json.dumps({"onnx": onnx_file} if packages is None else {"onnx": onnx_file, "packages": str(packages.resolve())})
    for version in _version_folders(model):
        _replace_file(version / "model.py", STANDIN_SOURCE.read_text(encoding="utf-8"))
        _replace_file(version / standin_onnx_model.SETTINGS_FILE, settings)
    return True


def stage_repository(
    root: Path, stand_ins: Iterable[StandIn], parent: Path | None = None, *, packages: Path | None = None
) -> StagedRepository:
    """A linked copy of ``root`` in a new temporary folder (under ``parent``), with the stand-ins installed.

    ``packages``: where the stand-ins import onnxruntime from (an image-Python server); None: the stub's
    own environment (the builder's venv).

    The caller removes ``path.parent`` (see ``remove_stage``) when done.
    """
    folder = Path(tempfile.mkdtemp(prefix="repo-builder-live-", dir=parent))
    staged = folder / "repository"
    try:
        _mirror(root, staged)
        installed = tuple(s.name for s in stand_ins if (staged / s.name).is_dir() and _install_standin(staged / s.name, packages))
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise ToolError(f"cannot stage a copy of {root} for the live check in {folder}: {exc}") from None
    except BaseException:
        with signals_deferred():
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return StagedRepository(staged, installed)


def remove_stage(staged: StagedRepository) -> None:
    with signals_deferred():
        shutil.rmtree(staged.path.parent, ignore_errors=True)
