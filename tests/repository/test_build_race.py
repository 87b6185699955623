"""The live server judges every state a ``--top-k`` rebuild passes through while it moves into place.

After each move the real Triton is asked to (re)load every model, members first (what a polling server
or a restart does in that state), and the ensemble must load and answer with labels and scores of one
width. The members and the ensemble change interface together here, so a plain member-first order
leaves a state whose ensemble Triton refuses; the writer's bridge config avoids it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import repo_builder.repository.writer as writer
from repo_builder.cli.main import main
from repo_builder.repository.moves import Move
from repo_builder.triton.client import error_text

pytestmark = [pytest.mark.triton, pytest.mark.slow]
TEXT = {"TEXT": np.array([[b"a short text to classify"]], dtype=np.object_)}
MEMBERS = ("clf_preprocess", "clf_model", "clf_postprocess")


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.text_classifier import export_text_classifier
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    root = tmp_path_factory.mktemp("race")
    tiny = make_tiny_text_classifier(root / "tiny", num_labels=6)  # --top-k 5 and 3 differ in interface
    export_text_classifier(tiny, root / "export", check_parity=False)
    return root / "export"


def build_args(export: Path, repo: Path, top_k: int) -> list[str]:
    # --replace: builds with another --top-k change the ensemble's output dims (an API change, issue 26).
    return ["build", "text-classifier", "--from-export", str(export), "--out", str(repo), "--name", "clf", "--runtime", "python",
            "--top-k", str(top_k), "--replace"]


def state_seen_by(server: Any) -> tuple[int, int] | str:
    """Reload every model as the repository now is; the ensemble's answer widths, or what failed."""
    for name in (*MEMBERS, "clf"):
        outcome = server.try_load(name)
        if not outcome.loaded:
            return f"{name} refused: {outcome.reason}"
    try:
        outputs = server.infer("clf", TEXT, timeout=30)
    except Exception as exc:  # any failure is what the test records
        return f"clf did not answer: {error_text(exc)}"
    return outputs["LABELS"].shape[-1], outputs["SCORES"].shape[-1]


def test_live_server_loads_and_answers_in_every_state_when_a_top_k_rebuild_moves_into_place(
    export: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from repo_builder.triton import start_server

    repo = tmp_path / "repo"
    assert main(build_args(export, repo, 5)) == 0
    # The Python stub would write __pycache__ into version folders, a change that reloads models.
    with start_server(repo, mode="explicit", environment=(("PYTHONDONTWRITEBYTECODE", "1"),)) as server:
        states: list[tuple[str, tuple[int, int] | str]] = [("before", state_seen_by(server))]
        real_apply = writer.apply_move

        def observed(move: Move, stage: Any, root: Path, *, rehearse: bool = False) -> None:
            real_apply(move, stage, root, rehearse=rehearse)
            if not rehearse:  # the real repository changed: what does Triton make of it now?
                states.append((move.describe(), state_seen_by(server)))

        monkeypatch.setattr(writer, "apply_move", observed)  # observes real moves; Triton itself is real
        assert main(build_args(export, repo, 3)) == 0
    assert len(states) > 4, states
    bad = [(after, seen) for after, seen in states if seen not in ((5, 5), (3, 3))]
    assert not bad, bad
    assert states[-1][1] == (3, 3)
