"""Writing the winning setting into the repository, as safely as a build writes: under the repository's
lock, rehearsed on a hard-linked preview beside it and validated offline there first; then each changed
step's ``config.pbtxt`` replaced atomically, members only (the ensemble's own config never changes, so
every state a polling Triton can see between two writes serves the same API and loads).

Each file keeps its own text with only the changed values edited (``edit``: comments, order and layout
kept, so the change reviews as a few lines in a pull request); it is rewritten whole from the proto only
when the edit does not parse back to the intended config, and the log says so."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf import text_format

from repo_builder.errors import RefusedError
from repo_builder.fsutil import write_text_atomic
from repo_builder.repository.moves import link_tree
from repo_builder.repository.stage import build_stage
from repo_builder.triton_config import ConfigParseError, parse_config_text, read_config_file
from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.tune.edit import EditError, edit_config_text
from repo_builder.tune.knobs import Setting, StepKnobs, apply_knobs
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Severity

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig

TUNED_HEADER = "# Tuned by repo-builder tune ({summary}); rerun it on the serving machine to re-tune.\n"


@dataclass(frozen=True)
class ConfigChange:
    """One step's new config text; ``in_place`` False: rewritten whole (``reason`` says why)."""

    text: str
    in_place: bool
    reason: str = ""


def change_config(text: str, config: ModelConfig, knobs: StepKnobs) -> ConfigChange:
    """``text`` with the knobs' values edited where they stand, when Triton's proto reads the result as
    exactly the intended config; otherwise the whole config rewritten from the proto (comments lost)."""
    intended = apply_knobs(config, knobs)
    try:
        edited = edit_config_text(text, config, intended)
        if parse_config_text(edited, CONFIG_FILE) == intended:
            return ConfigChange(edited, True)
        reason = "the edited text did not parse back to the intended config"
    except EditError as exc:
        reason = str(exc)
    except ConfigParseError as exc:
        reason = f"the edited text did not parse ({exc.detail})"
    return ConfigChange(TUNED_HEADER.format(summary=knobs.describe()) + text_format.MessageToString(intended), False, reason)


def _changes(repository: Path, configs: Mapping[str, ModelConfig], setting: Setting, original: Setting) -> dict[str, ConfigChange]:
    before = dict(original)
    out: dict[str, ConfigChange] = {}
    for name, knobs in setting:
        if before.get(name) == knobs:
            continue
        text = read_config_file(repository / name / CONFIG_FILE, repository).text
        out[name] = change_config(text or "", configs[name], knobs)  # unreadable now: no text to keep, a rewrite
    return out


def write_winner(
    repository: Path,
    configs: Mapping[str, ModelConfig],
    winner: Setting,
    original: Setting,
    log: Callable[[str], None] = lambda _: None,
) -> list[str]:
    """The step names whose config changed (none when the repository's own setting won)."""
    changes = _changes(repository, configs, winner, original)
    if not changes:
        return []
    texts = {name: change.text for name, change in changes.items()}
    with build_stage(repository, log) as stage:
        link_tree(repository, stage.preview)
        for name, text in texts.items():
            write_text_atomic(stage.preview / name / CONFIG_FILE, text)
        report = validate_repository(stage.preview)
        errors = [d for d in report.diagnostics if d.severity == Severity.ERROR]
        shutil.rmtree(stage.preview, ignore_errors=True)
        if errors:
            first = errors[0]
            raise RefusedError(f"{repository}: the tuned configs would not load ({first.code} {first.message}); nothing was written")
        for name, change in changes.items():
            path = repository / name / CONFIG_FILE
            write_text_atomic(path, change.text)
            log(f"wrote {path}: " + ("the changed values only" if change.in_place else
                f"rewritten whole, comments and layout not kept (could not edit it in place: {change.reason})"))
    return list(texts)
