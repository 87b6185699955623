"""Writing rendered models into a repository: staged beside it, validated, then moved in safely.

1. ``stage_model`` writes each rendered model into the stage (``stage.Stage``, beside ``--out``).
2. ``commit_models`` plans the moves (``moves``), rehearses them on a hard-linked preview of the
   repository and validates the state after every move that changes what a server serves. The final
   state must pass, or nothing moves (``RefusedError``). Where members and their ensemble change
   interface together (``--top-k``), a plan that first gives the ensemble a *bridge* config (the changed
   dims as -1, consistent with the old and the new members) is tried too, and the first plan whose every
   state passes is used.
3. The chosen moves are done for real, one atomic operation each. A first build is renamed in whole.

``REPO_BUILDER_COMMIT_PAUSE`` (seconds) sleeps before each move: the kill tests use it to land signals
while models are moving into place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf import text_format

from repo_builder.errors import RefusedError, ToolError, UserError
from repo_builder.fsutil import sha256_file, write_text_atomic
from repo_builder.render.parse_back import parse_config
from repo_builder.render.rendered import RenderedModel
from repo_builder.repository.moves import Kind, Move, apply_move, link_tree, plan_model
from repo_builder.repository.stage import Stage
from repo_builder.repository.versions import existing_versions, pin_config, read_config, served_versions
from repo_builder.triton_layout import CONFIG_FILE

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig

Log = Callable[[str], None]
# The error lines of the repository at a path (empty when it passes): the offline validator, in a build.
Judge = Callable[[Path], Sequence[str]]
BRIDGE_COMMENT = "# repo-builder bridge: consistent with the old and the new members while they are switched"


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


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


def stage_model(stage: Stage, model: RenderedModel) -> StagedModel:
    """Write one rendered model into ``<stage>/models/<name>``; files already inside the stage are moved."""
    folder = stage.models / model.name
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
        if _inside(source, stage.root):
            os.rename(source, target)  # export/compile output made in the stage: a rename, not a copy
        else:
            shutil.copyfile(source, target)
        hashes[rel] = sha256_file(target)
    return StagedModel(model.name, model.role, model.version, folder, hashes, hashlib.sha256(config).hexdigest())


def bridge_config(old: ModelConfig | None, new: ModelConfig) -> ModelConfig | None:
    """An ensemble config consistent with both ``old``'s and ``new``'s members, or None when there is none
    (or none is needed): the same steps, every dim that changes made -1, the smaller max_batch_size."""
    if old is None or old.platform != "ensemble" or new.platform != "ensemble":
        return None
    if old.ensemble_scheduling != new.ensemble_scheduling or (old.max_batch_size == 0) != (new.max_batch_size == 0):
        return None
    bridge = type(new)()
    bridge.CopyFrom(new)
    bridge.max_batch_size = min(old.max_batch_size, new.max_batch_size)
    for field in ("input", "output"):
        before = {t.name: t for t in getattr(old, field)}
        if set(before) != {t.name for t in getattr(bridge, field)}:
            return None
        for tensor in getattr(bridge, field):
            was = before[tensor.name]
            if was.data_type != tensor.data_type or len(was.dims) != len(tensor.dims):
                return None
            for i, (a, b) in enumerate(zip(was.dims, tensor.dims, strict=True)):
                tensor.dims[i] = a if a == b else -1
    return None if bridge == new else bridge


def _bridge_move(stage: Stage, model: StagedModel) -> Move | None:
    target = stage.out / model.name
    if not target.is_dir() or target.is_symlink():
        return None
    _, old = read_config(target)
    new = parse_config((model.folder / CONFIG_FILE).read_text(encoding="utf-8"), str(model.folder / CONFIG_FILE))
    bridge = bridge_config(old, new)
    if bridge is None:
        return None
    served = served_versions(old, existing_versions(target))
    text = pin_config(f"{BRIDGE_COMMENT}\n{text_format.MessageToString(bridge)}", bridge, served)
    return Move(Kind.WRITE_CONFIG, model.name, config=text, switch=True)


def candidate_plans(stage: Stage, ordered: Sequence[StagedModel]) -> list[list[Move]]:
    """The plain plan, and when an existing ensemble changes interface, the plan that bridges it first."""
    plain = [move for model in ordered for move in plan_model(stage, model)]
    bridges: list[Move] = []
    bridged: list[Move] = []
    for model in ordered:
        bridge = _bridge_move(stage, model)
        current = None
        if bridge is not None:
            bridges.append(bridge)
            assert bridge.config is not None
            current = (bridge.config, parse_config(bridge.config, f"bridge of {model.name}"))
        bridged += plan_model(stage, model, current)
    return [plain, bridges + bridged] if bridges else [plain]


@dataclass(frozen=True)
class Rehearsal:
    plan: tuple[Move, ...]
    failures: tuple[tuple[Move, tuple[str, ...]], ...]  # intermediate states that do not pass
    final: tuple[str, ...]  # errors of the final state


def rehearse(stage: Stage, plan: Sequence[Move], judge: Judge) -> Rehearsal:
    """Do ``plan`` on a fresh hard-linked preview of the repository, validating each switched state."""
    shutil.rmtree(stage.preview, ignore_errors=True)
    try:
        link_tree(stage.out, stage.preview)
    except (OSError, shutil.Error) as exc:
        raise ToolError(f"{stage.out}: cannot make the preview the build is validated on ({exc}); check the repository's permissions") from None
    failures = []
    for i, move in enumerate(plan):
        apply_move(move, stage, stage.preview, rehearse=True)
        if move.switch and i < len(plan) - 1:
            errors = tuple(judge(stage.preview))
            if errors:
                failures.append((move, errors))
    return Rehearsal(tuple(plan), tuple(failures), tuple(judge(stage.preview)))


def _refuse(final: Sequence[str], out: Path, log: Log) -> RefusedError:
    for line in final:
        log(f"  {line}")
    return RefusedError(f"{out}: the repository this build would leave fails validation ({len(final)} errors above); nothing was moved")


def choose_plan(stage: Stage, ordered: Sequence[StagedModel], judge: Judge, log: Log) -> list[Move]:
    """The first candidate plan whose every state passes; else the one with fewest failing states, with a warning."""
    tried = []
    for plan in candidate_plans(stage, ordered):
        result = rehearse(stage, plan, judge)
        if result.final:
            raise _refuse(result.final, stage.out, log)
        if not result.failures:
            _log_plan(result.plan, log)
            return list(result.plan)
        tried.append(result)
    best = min(tried, key=lambda r: len(r.failures))
    for move, errors in best.failures:
        log(f"warning: no order of moves keeps every state loadable: after '{move.describe()}' a polling Triton would see: {errors[0]}")
    return list(best.plan)


def _log_plan(plan: Sequence[Move], log: Log) -> None:
    switches = sum(move.switch for move in plan)
    log(f"moving into place: {len(plan)} moves, the {switches} states a server can see each validated")
    for move in plan:
        if move.config is not None and move.config.startswith(BRIDGE_COMMENT):
            log(f"  '{move.model}' changes interface with its members: a bridge config keeps it loadable meanwhile")


def _pause() -> None:
    pause = float(os.environ.get("REPO_BUILDER_COMMIT_PAUSE", "0") or 0)
    if pause > 0:
        time.sleep(pause)


def _commit_first(stage: Stage, ordered: Sequence[StagedModel], judge: Judge | None, log: Log) -> None:
    """A new (or empty) repository appears whole, with one rename."""
    for model in ordered:
        path = model.folder / CONFIG_FILE
        text = path.read_text(encoding="utf-8")
        write_text_atomic(path, pin_config(text, parse_config(text, str(path)), [model.version]))
    final = tuple(judge(stage.models)) if judge is not None else ()
    if final:
        raise _refuse(final, stage.out, log)
    _pause()
    os.rename(stage.models, stage.out)


def commit_models(
    stage: Stage,
    staged: Sequence[StagedModel],
    *,
    judge: Judge | None = None,
    log: Log = lambda _: None,
    after_move: Callable[[Move], None] | None = None,
) -> list[Move]:
    """Move staged models into ``stage.out`` (ensembles after their members); the moves done.

    With ``judge``, the result (and every state on the way) is validated before anything moves.
    """
    ordered = sorted(staged, key=lambda m: m.role == "ensemble")  # stable: members keep their order
    out = stage.out
    if not out.exists() or not any(out.iterdir()):
        _commit_first(stage, ordered, judge, log)
        return []
    plan = choose_plan(stage, ordered, judge, log) if judge is not None else candidate_plans(stage, ordered)[0]
    shutil.rmtree(stage.preview, ignore_errors=True)
    for move in plan:
        _pause()
        apply_move(move, stage, out)
        if after_move is not None:
            after_move(move)
    return plan
