"""export token-classifier: per-token logits with dynamic batch and sequence axes, parity, what the entity step
needs recorded in signature.json; checkpoints without a token-classification head refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repo_builder.errors import UserError
from repo_builder.export.tiny_models import make_tiny_text_classifier
from repo_builder.export.tiny_token_classifier import TINY_NER_LABELS, make_tiny_token_classifier
from repo_builder.export.token_classifier import export_token_classifier
from repo_builder.spec import OnnxArtifact

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ner_export(tmp_path_factory: pytest.TempPathFactory) -> OnnxArtifact:
    model = make_tiny_token_classifier(tmp_path_factory.mktemp("ner") / "model")
    return export_token_classifier(model, tmp_path_factory.mktemp("ner-export") / "out")


def test_export_token_classifier_has_dynamic_batch_and_sequence_axes_when_exported(ner_export: OnnxArtifact) -> None:
    signature = ner_export.signature
    (logits,) = signature.outputs
    assert logits.name == "logits" and list(logits.shape) == ["batch", "sequence", len(TINY_NER_LABELS)]
    assert all(list(t.shape) == ["batch", "sequence"] and t.dtype == "int64" for t in signature.inputs)
    assert [t.name for t in signature.inputs] == ["input_ids", "attention_mask", "token_type_ids"]
    assert signature.parity and all(p.passed and p.max_abs_error < 1e-4 for p in signature.parity)


def test_export_token_classifier_records_what_the_entity_step_needs_when_exported(ner_export: OnnxArtifact) -> None:
    metadata = json.loads(ner_export.signature_path.read_text())["metadata"]
    assert metadata["task"] == "token-classification"
    assert metadata["entities"] == {"labels": list(TINY_NER_LABELS), "unk_id": 1, "word_aware": True}
    assert metadata["preprocess"]["max_length"] == 128
    assert (ner_export.onnx_path.parent / "tokenizer" / "tokenizer.json").is_file()
    assert ner_export.labels == TINY_NER_LABELS


def test_export_token_classifier_refuses_bare_encoder_when_config_names_no_architecture(tmp_path: Path) -> None:
    bare = make_tiny_text_classifier(tmp_path / "bare", with_head=False)
    config = json.loads((bare / "config.json").read_text())
    config.pop("architectures", None)
    (bare / "config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match=r"has no trained token-classification head \(classifier\.") as caught:
        export_token_classifier(bare, tmp_path / "out")
    assert "\n" not in str(caught.value) and not (tmp_path / "out").exists()


def test_export_token_classifier_refuses_sequence_classifier_when_architecture_is_another_task(tmp_path: Path) -> None:
    sequence = make_tiny_text_classifier(tmp_path / "seq")
    with pytest.raises(UserError, match="is a BertForSequenceClassification checkpoint, not a token classifier"):
        export_token_classifier(sequence, tmp_path / "out")
