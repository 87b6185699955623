"""The moves that put staged models into a repository, planned so that every state between two of them
is one a polling Triton loads.

Each move is one atomic filesystem operation (a rename, an exchange, an ``os.replace`` of a config), so a
server polling at any instant, or a build killed at any instant, sees the state after some prefix of the
list. Per model the plan is "pin, add, switch" (see ``versions``): the current config is first pinned to
the version it serves, the new version folder is added (invisible under the pin), and the new config,
pinned to the new version, replaces the old one: files and config change together. Replacing the served
version itself (``--force``) goes through a temporary version number so that it is never rewritten while
served. Whether the states are also consistent ACROSS models (an ensemble and its members) is not assumed
here: the writer rehearses the plan on a preview and validates each state.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from repo_builder.compat import StrEnum
from repo_builder.errors import UserError
from repo_builder.fsutil import write_text_atomic
from repo_builder.render.parse_back import parse_config
from repo_builder.repository.stage import Stage
from repo_builder.repository.versions import (
    existing_versions,
    is_pinned,
    pin_config,
    read_config,
    same_but_policy,
    served_versions,
)
from repo_builder.triton_layout import CONFIG_FILE

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig


class Kind(StrEnum):
    NEW_MODEL = "new model"  # the whole staged model folder renamed in
    ADD_VERSION = "add version"  # a staged version folder renamed in
    EXCHANGE_VERSION = "exchange version"  # an existing version folder swapped with the staged one
    WRITE_CONFIG = "write config"  # config.pbtxt replaced
    REMOVE_VERSION = "remove version"  # a temporary version folder moved out


@dataclass(frozen=True)
class Move:
    kind: Kind
    model: str
    version: int | None = None
    source: str = ""  # what moves in, relative to the stage root
    config: str | None = None  # the config text written (WRITE_CONFIG, NEW_MODEL)
    switch: bool = False  # what a server serves may change: the state after it is validated

    def describe(self) -> str:
        version = f"/{self.version}" if self.version is not None else ""
        return f"{self.kind} {self.model}{version}"


class StagedConfig(Protocol):
    """What the planner needs of a staged model (``writer.StagedModel`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def folder(self) -> Path: ...  # <stage>/models/<name>


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)  # the preview must not cost a copy of every plan in the repository
    except OSError:
        shutil.copy2(src, dst)


def link_tree(source: Path, target: Path) -> None:
    """A copy of ``source`` at ``target`` made of hard links (copies where links are refused)."""
    shutil.copytree(source, target, symlinks=True, copy_function=_link_or_copy)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False when unsupported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _bring(source: Path, target: Path, rehearse: bool) -> None:
    if rehearse:
        link_tree(source, target)
    else:
        os.rename(source, target)


def apply_move(move: Move, stage: Stage, root: Path, *, rehearse: bool = False) -> None:
    """Do ``move`` in ``root`` (the repository, or the preview when ``rehearse``: sources are then linked,
    not moved, so the same plan can be done for real afterwards)."""
    source = stage.root / move.source
    model_dir = root / move.model
    if move.kind is Kind.NEW_MODEL:
        assert move.config is not None
        write_text_atomic(source / CONFIG_FILE, move.config)  # pinned before it becomes visible
        _bring(source, model_dir, rehearse)
    elif move.kind is Kind.ADD_VERSION:
        _bring(source, model_dir / str(move.version), rehearse)
    elif move.kind is Kind.EXCHANGE_VERSION:
        _exchange_version(source, model_dir / str(move.version), stage, rehearse)
    elif move.kind is Kind.WRITE_CONFIG:
        assert move.config is not None
        write_text_atomic(model_dir / CONFIG_FILE, move.config)
    elif move.kind is Kind.REMOVE_VERSION:
        _park(model_dir / str(move.version), stage, rehearse)


def _park(folder: Path, stage: Stage, rehearse: bool) -> None:
    if rehearse:
        shutil.rmtree(folder)
        return
    stage.parked.mkdir(exist_ok=True)
    os.rename(folder, stage.parked / f"{folder.parent.name}-{folder.name}-{len(list(stage.parked.iterdir()))}")


def _exchange_version(source: Path, target: Path, stage: Stage, rehearse: bool) -> None:
    if rehearse:
        shutil.rmtree(target)
        link_tree(source, target)
    elif not _exchange(source, target):
        # No atomic exchange here: the version is briefly absent. The plan only replaces versions that are
        # not served at that moment, so a server sees no difference.
        _park(target, stage, rehearse=False)
        os.rename(source, target)


def _pin_move(name: str, text: str | None, config: ModelConfig | None, served: tuple[int, ...], adding: Sequence[int]) -> list[Move]:
    """Pin the current config to what it serves, when adding ``adding`` would otherwise change that."""
    if text is None or config is None or not served:
        return []  # nothing loadable is served now: there is nothing a new folder could disturb
    if is_pinned(config) and not set(adding) & set(config.version_policy.specific.versions):
        return []
    return [Move(Kind.WRITE_CONFIG, name, config=pin_config(text, config, served), switch=True)]


def plan_model(stage: Stage, model: StagedConfig, current: tuple[str | None, ModelConfig | None] | None = None) -> list[Move]:
    """The moves that put one staged model into ``stage.out``; ``current``: its config as the plan left
    it so far (read from the repository when None)."""
    target = stage.out / model.name
    rel = model.folder.relative_to(stage.root)
    new_text = (model.folder / CONFIG_FILE).read_text(encoding="utf-8")
    new_config = parse_config(new_text, str(model.folder / CONFIG_FILE))
    n = model.version
    if not (target.exists() or target.is_symlink()):
        return [Move(Kind.NEW_MODEL, model.name, source=str(rel), config=pin_config(new_text, new_config, [n]), switch=True)]
    if target.is_symlink() or not target.is_dir():
        raise UserError(f"{target}: exists and is not a model folder; remove it or choose another --name")
    present = existing_versions(target)
    old_text, old_config = current if current is not None else read_config(target)
    newest = max([*present, n])
    if n < newest:
        return _plan_older(target, model, rel, old_config, new_config, newest, present)
    served = served_versions(old_config, present)
    final = pin_config(new_text, new_config, [n])
    if n not in present:
        return [
            *_pin_move(model.name, old_text, old_config, served, [n]),
            Move(Kind.ADD_VERSION, model.name, n, source=f"{rel}/{n}"),
            Move(Kind.WRITE_CONFIG, model.name, config=final, switch=True),
        ]
    # Replacing the version being served: serve a temporary copy meanwhile, never a folder being rewritten.
    spare = newest + 1
    if not (model.folder / str(spare)).exists():  # planned more than once (plain, bridged)
        link_tree(model.folder / str(n), model.folder / str(spare))
    return [
        *_pin_move(model.name, old_text, old_config, served, [spare]),
        Move(Kind.ADD_VERSION, model.name, spare, source=f"{rel}/{spare}"),
        Move(Kind.WRITE_CONFIG, model.name, config=pin_config(new_text, new_config, [spare]), switch=True),
        Move(Kind.EXCHANGE_VERSION, model.name, n, source=f"{rel}/{n}"),
        Move(Kind.WRITE_CONFIG, model.name, config=final, switch=True),
        Move(Kind.REMOVE_VERSION, model.name, spare),
    ]


def _plan_older(
    target: Path, model: StagedConfig, rel: Path, old_config: ModelConfig | None, new_config: ModelConfig | None, newest: int, present: tuple[int, ...]
) -> list[Move]:
    """Writing a version below the newest one: the shared config must stay as the newer versions need it."""
    if not same_but_policy(old_config, new_config):
        raise UserError(
            f"{target}: writing version {model.version} would change config.pbtxt, which version {newest} shares "
            f"(its files were built for the current config); omit --version to write version {newest + 1}, "
            f"or build with the same settings as version {newest}"
        )
    n = model.version
    kind = Kind.EXCHANGE_VERSION if n in present else Kind.ADD_VERSION
    return [Move(kind, model.name, n, source=f"{rel}/{n}", switch=True)]
