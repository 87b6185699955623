"""No silent random heads: a checkpoint without a classification head is refused unless asked for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.export.text_classifier import export_text_classifier, head_labels
from repo_builder.export.tiny_models import make_tiny_text_classifier


@pytest.fixture(scope="module")
def bare_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_text_classifier(tmp_path_factory.mktemp("bare") / "bert", seed=2, with_head=False)


def test_text_export_refuses_the_checkpoint_when_it_has_no_classification_head(bare_encoder: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no trained classification head") as info:
        export_text_classifier(bare_encoder, tmp_path / "out", check_parity=False)
    assert "--new-head" in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "out").exists()


def test_text_export_records_an_untrained_head_when_new_head_is_given(bare_encoder: Path, tmp_path: Path) -> None:
    artifact = export_text_classifier(bare_encoder, tmp_path / "out", new_head=["neg", "pos"])
    meta = json.loads((tmp_path / "out" / "signature.json").read_text())["metadata"]
    assert meta["head"] == "untrained"
    assert artifact.labels == ("neg", "pos")
    assert artifact.signature.outputs[0].shape == ("batch", 2)
    assert all(p.passed for p in artifact.signature.parity)


def test_text_export_records_a_trained_head_when_the_checkpoint_has_one(tiny_bert_export: Any) -> None:
    assert tiny_bert_export.signature.metadata["head"] == "trained"


def test_head_labels_reads_one_label_per_line_when_given_a_file(tmp_path: Path) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("spam\nham\n")
    assert head_labels(labels, None) == ["spam", "ham"]
    assert head_labels(None, 3) == ["LABEL_0", "LABEL_1", "LABEL_2"]
    assert head_labels(None, None) is None
    with pytest.raises(UserError, match="not both"):
        head_labels(labels, 2)


def test_export_cli_refuses_bare_encoder_in_one_line_when_no_head_is_asked(bare_encoder: Path, tmp_path: Path, capsys: Any) -> None:
    code = main(["export", "text-classifier", "--model", str(bare_encoder), "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --model") and err.count("\n") == 1, err


def test_export_cli_shows_untrained_head_when_num_labels_is_given(bare_encoder: Path, tmp_path: Path, capsys: Any) -> None:
    code = main(["export", "text-classifier", "--model", str(bare_encoder), "--out", str(tmp_path / "o"), "-q", "--num-labels", "3", "--no-parity"])
    out = capsys.readouterr().out
    assert code == 0
    assert "head: untrained" in out and "output logits: float32 (TYPE_FP32) [batch, 3]" in out


def test_head_labels_refuses_a_head_wider_than_the_limit_or_a_labels_file_that_is_no_file(tmp_path: Path) -> None:
    """--num-labels 2**31 once built a list of two billion names (MemoryError, an internal error: the CLI fuzz test);
    a labels file that is a device or FIFO would be read without end."""
    from repo_builder.export.text_classifier import MAX_HEAD_LABELS

    assert len(head_labels(None, MAX_HEAD_LABELS) or []) == MAX_HEAD_LABELS
    for count in (0, MAX_HEAD_LABELS + 1, 2**31):
        with pytest.raises(UserError, match=f"--num-labels must be between 1 and {MAX_HEAD_LABELS:,}, got {count}"):
            head_labels(None, count)
    with pytest.raises(UserError, match="not a regular file of at most"):
        head_labels(Path("/dev/zero"), None)
    wide = tmp_path / "labels.txt"
    wide.write_text("\n".join(f"l{i}" for i in range(MAX_HEAD_LABELS + 1)), encoding="utf-8")
    with pytest.raises(UserError, match="more than 100,000"):
        head_labels(wide, None)
