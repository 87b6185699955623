"""Writing the winning setting into the repository, as safely as a build writes: under the repository's
lock, rehearsed on a hard-linked preview beside it and validated offline there first; then each changed
step's ``config.pbtxt`` replaced atomically, members only (the ensemble's own config never changes, so
every state a polling Triton can see between two writes serves the same API and loads)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf import text_format

from repo_builder.errors import RefusedError
from repo_builder.fsutil import write_text_atomic
from repo_builder.repository.moves import link_tree
from repo_builder.repository.stage import build_stage
from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.tune.knobs import Setting, apply_knobs
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Severity

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig

TUNED_HEADER = "# Tuned by repo-builder tune ({summary}); rerun it on the serving machine to re-tune.\n"


def _texts(configs: Mapping[str, ModelConfig], setting: Setting, original: Setting) -> dict[str, str]:
    before = dict(original)
    return {
        name: TUNED_HEADER.format(summary=knobs.describe()) + text_format.MessageToString(apply_knobs(configs[name], knobs))
        for name, knobs in setting
        if before.get(name) != knobs
    }


def write_winner(
    repository: Path,
    configs: Mapping[str, ModelConfig],
    winner: Setting,
    original: Setting,
    log: Callable[[str], None] = lambda _: None,
) -> list[str]:
    """The step names whose config changed (none when the repository's own setting won)."""
    texts = _texts(configs, winner, original)
    if not texts:
        return []
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
        for name, text in texts.items():
            write_text_atomic(repository / name / CONFIG_FILE, text)
            log(f"wrote {repository / name / CONFIG_FILE}")
    return list(texts)
