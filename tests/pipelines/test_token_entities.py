"""The entity step's numpy postprocessing (templates/model/token_entities.py.j2) against transformers' own
token-classification pipeline, in process: same checkpoint, same logits, every aggregation strategy.

The served end-to-end check (through the ensemble on the embedded Triton) is in test_token_classifier_e2e.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from repo_builder.pipelines.token_reference import (
    compare_entities,
    import_entities,
    load_pipeline,
    reference_texts,
)
from repo_builder.render.environment import make_environment
from repo_builder.render.render import render_source

AGGREGATIONS = ("none", "simple", "first", "average", "max")


@pytest.fixture(scope="module")
def entities(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("entities") / "entities.py"
    path.write_text(render_source(make_environment(None), "model/token_entities.py.j2", {}), encoding="utf-8")
    return import_entities(path)


@pytest.fixture(scope="module")
def ner_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.tiny_token_classifier import make_tiny_token_classifier

    return make_tiny_token_classifier(tmp_path_factory.mktemp("tiny-ner") / "ner")


@pytest.fixture(scope="module")
def non_word_aware_dir(ner_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same model with a tokenizer whose WordPiece has no continuing-subword prefix: the pipeline then
    falls back to its "no space before the token" heuristic for words."""
    import shutil

    folder = tmp_path_factory.mktemp("tiny-ner-nwa") / "ner"
    shutil.copytree(ner_dir, folder)
    spec = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    spec["model"]["continuing_subword_prefix"] = ""
    (folder / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    return folder


class InProcess:
    """The tiny model's logits for one text, tokenized with `tokenizers` as the preprocessing step does."""

    def __init__(self, folder: Path) -> None:
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoModelForTokenClassification

        self.torch = torch
        self.model = AutoModelForTokenClassification.from_pretrained(str(folder), local_files_only=True).eval()
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=128)
        config = self.model.config
        self.labels = [config.id2label[i] for i in range(config.num_labels)]
        self.vocab = [self.tokenizer.id_to_token(i) for i in range(self.tokenizer.get_vocab_size(with_added_tokens=True))]
        self.word_aware = bool(self.tokenizer.model.continuing_subword_prefix)

    def decoder(self, entities: Any, aggregation: str, ignore: list[str]) -> Any:
        return entities.EntityDecoder(self.labels, ignore, aggregation, self.vocab, self.tokenizer.decoder.decode,
                                      self.tokenizer.token_to_id("[UNK]"), self.word_aware)

    def run(self, decoder: Any, text: str) -> list[dict[str, Any]]:
        e = self.tokenizer.encode(text)
        with self.torch.no_grad():
            logits = self.model(input_ids=self.torch.tensor([e.ids]), attention_mask=self.torch.tensor([e.attention_mask]),
                                token_type_ids=self.torch.tensor([e.type_ids])).logits.numpy()
        (row,) = decoder.batch(logits, np.array([e.ids]), np.array([e.offsets]), np.array([e.special_tokens_mask]), [text])
        return json.loads(row)


def assert_same_as_pipeline(folder: Path, entities: Any, aggregation: str, ignore: list[str], texts: list[str]) -> None:
    local = InProcess(folder)
    decoder = local.decoder(entities, aggregation, ignore)
    expected = load_pipeline(folder, aggregation, ignore)(texts)
    assert sum(len(row) for row in expected) > len(texts)  # random weights: plenty of entities to compare
    for text, want in zip(texts, expected, strict=True):
        _, problem = compare_entities(want, local.run(decoder, text))
        assert problem is None, f"{aggregation} {text!r}: {problem}"


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_entities_equal_transformers_pipeline_when_each_aggregation_runs_on_200_texts(ner_dir: Path, entities: Any, aggregation: str) -> None:
    assert_same_as_pipeline(ner_dir, entities, aggregation, ["O"], reference_texts(200))


@pytest.mark.slow
@pytest.mark.parametrize(("aggregation", "ignore"), [("simple", []), ("none", []), ("first", ["O", "MISC"]), ("max", ["PER", "B-LOC"])])
def test_entities_equal_transformers_pipeline_when_ignore_labels_change(ner_dir: Path, entities: Any, aggregation: str, ignore: list[str]) -> None:
    assert_same_as_pipeline(ner_dir, entities, aggregation, ignore, reference_texts(60, seed=1))


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", ["simple", "first", "average", "max"])
def test_entities_equal_transformers_pipeline_when_tokenizer_has_no_subword_prefix(non_word_aware_dir: Path, entities: Any, aggregation: str) -> None:
    assert not InProcess(non_word_aware_dir).word_aware
    with pytest.warns(UserWarning) if aggregation != "simple" else _nothing():  # the pipeline warns about its heuristic
        assert_same_as_pipeline(non_word_aware_dir, entities, aggregation, ["O"], reference_texts(60, seed=2))


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# --- the grouping rules on hand-made scores (no model) ---------------------------------------------------

LABELS = ["O", "B-PER", "I-PER", "MISC"]


def one_hot(labels: list[int], confidence: float = 0.9) -> np.ndarray:
    """Logits whose softmax gives ``confidence`` to each token's label."""
    rest = (1 - confidence) / (len(LABELS) - 1)
    logits = np.full((len(labels), len(LABELS)), np.log(rest), dtype=np.float32)
    logits[np.arange(len(labels)), labels] = np.log(confidence)
    return logits


def decode_hand_made(entities: Any, aggregation: str, labels: list[int], words: list[str], ignore: tuple[str, ...] = ("O",)) -> list[dict[str, Any]]:
    vocab = ["[CLS]", "[SEP]", "[UNK]", *words]
    decoder = entities.EntityDecoder(LABELS, ignore, aggregation, vocab, " ".join, 2, True)
    text = " ".join(words)
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
    offsets = np.array([[0, 0], *[[s, s + len(w)] for s, w in zip(starts, words, strict=True)], [0, 0]])
    ids = np.arange(len(words)) + 3
    logits = np.concatenate([np.zeros((1, len(LABELS)), np.float32), one_hot(labels), np.zeros((1, len(LABELS)), np.float32)])
    special = np.array([1] + [0] * len(words) + [1])
    (row,) = decoder.batch(logits[None], np.concatenate([[0], ids, [1]])[None], offsets[None], special[None], [text])
    return json.loads(row)


def test_entity_groups_split_when_a_b_tag_follows_the_same_tag(entities: Any) -> None:
    got = decode_hand_made(entities, "simple", [1, 2, 1, 0], ["ada", "lovelace", "alan", "and"])
    assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in got] == [("PER", "ada lovelace", 0, 12), ("PER", "alan", 13, 17)]
    assert got[0]["score"] == pytest.approx(0.9, abs=1e-6)


def test_entity_groups_keep_a_label_without_prefix_whole_when_it_repeats(entities: Any) -> None:
    got = decode_hand_made(entities, "simple", [3, 3, 0, 3], ["a", "b", "c", "d"])
    assert [(e["entity_group"], e["word"]) for e in got] == [("MISC", "a b"), ("MISC", "d")]


def test_entities_include_o_tokens_when_ignore_labels_is_empty(entities: Any) -> None:
    got = decode_hand_made(entities, "none", [0, 1], ["x", "y"], ignore=())
    assert [(e["entity"], e["index"], e["word"]) for e in got] == [("O", 1, "x"), ("B-PER", 2, "y")]


def test_entities_are_empty_when_text_has_only_special_tokens(entities: Any) -> None:
    decoder = entities.EntityDecoder(LABELS, ("O",), "simple", ["[CLS]", "[SEP]"], " ".join, None, True)
    (row,) = decoder.batch(np.zeros((1, 2, 4), np.float32), np.array([[0, 1]]), np.zeros((1, 2, 2), int), np.array([[1, 1]]), [""])
    assert json.loads(row) == []


def test_entity_decoder_refuses_unknown_aggregation_when_constructed(entities: Any) -> None:
    with pytest.raises(ValueError, match="aggregation 'mean'"):
        entities.EntityDecoder(LABELS, ("O",), "mean", [], " ".join, None, True)


def test_entity_json_equals_json_dumps_when_words_need_escaping_or_scores_are_not_finite(entities: Any) -> None:
    decoder = entities.EntityDecoder(LABELS, ("O",), "simple", [], " ".join, None, True)
    columns = [[1, 3], [0.5, 0.25], ['say "hi"\\', "é\n日本 😀"], [0, 4], [3, 9]]
    expected = [{"entity_group": "PER", "score": 0.5, "word": 'say "hi"\\', "start": 0, "end": 3},
                {"entity_group": "MISC", "score": 0.25, "word": "é\n日本 😀", "start": 4, "end": 9}]
    assert decoder.to_json("group", columns) == json.dumps(expected, ensure_ascii=False)
    token_columns = [[2], [float("nan")], [7], ["x"], [1], [2]]
    assert decoder.to_json("token", token_columns) == json.dumps(
        [{"entity": "I-PER", "score": float("nan"), "index": 7, "word": "x", "start": 1, "end": 2}], ensure_ascii=False)
