"""A BERT WordPiece tokenizer as an ONNX graph run by onnxruntime-extensions' custom ops (``--preprocess onnx``).

The extensions' ``BertTokenizer`` op lowercases and strips accents with its own per-character tables, and
splits on its own idea of punctuation and whitespace: on a real uncased vocabulary (all-MiniLM-L6-v2) it
gives other ids than the Hugging Face tokenizer for ~11,000 code points (Latin Extended, Greek, kana with
dakuten, CJK punctuation, private use). So the graph does the Hugging Face normalization itself, per
character, before the op, and leaves the op only WordPiece, truncation and the special tokens:

  1. ``StringRegexReplace``: delete what the normalizer deletes (control characters, combining accents when
     stripping) and turn every character the pre-tokenizer splits on as whitespace into a space;
  2. ``StringRegexSplitWithOffsets`` into characters, ``StringMapping`` each through a table computed here by
     running the checkpoint's own normalizer (tokenizer.json) on every code point, with punctuation and
     Chinese characters surrounded by spaces as ``BertPreTokenizer`` splits them, then ``StringJoin``;
  3. ``BertTokenizer`` with every normalization switched off (it splits on spaces only).

The op takes one text; a ``Loop`` runs it per row, pads each to ``max_length`` and the batch is then cut to
its longest row. A tokenizer the op cannot reproduce (not BertNormalizer + BertPreTokenizer + WordPiece +
``[CLS] $A [SEP]``) is refused with one line naming its tokenizer.json. onnxruntime-extensions and
tokenizers are imported inside functions (the export extra).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError, require

CONTRIB = "ai.onnx.contrib"
_SUFFIX = "##"  # onnxruntime-extensions' op domain
OUTPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
TEXT_INPUT = "TEXT"
_MAX_CODE_POINT = 0x110000


@dataclass(frozen=True)
class WordPieceTokenizer:
    """What the graph needs from a saved fast BERT tokenizer (tokenizer.json)."""

    path: Path  # the tokenizer.json it was read from (for messages)
    vocab: tuple[str, ...]  # tokens by id
    unk_token: str
    cls_token: str
    sep_token: str
    max_input_chars_per_word: int


def _refuse(path: Path, what: str) -> UserError:
    return UserError(f"{path}: {what}; --preprocess onnx reproduces BERT WordPiece tokenizers only (use --preprocess python)")


def read_wordpiece_tokenizer(tokenizer_json: Path) -> WordPieceTokenizer:
    """The tokenizer's parts, refused unless the ONNX graph reproduces it exactly."""
    try:
        data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{tokenizer_json}: cannot read it as JSON ({exc})") from None
    model = data.get("model") or {}
    if model.get("type") != "WordPiece":
        raise _refuse(tokenizer_json, f"model is {model.get('type')!r}, not WordPiece")
    if (model.get("continuing_subword_prefix") or "##") != "##":
        raise _refuse(tokenizer_json, "the continuing-subword prefix is not '##'")
    if (data.get("normalizer") or {}).get("type") != "BertNormalizer":
        raise _refuse(tokenizer_json, f"normalizer is {(data.get('normalizer') or {}).get('type')!r}, not BertNormalizer")
    if (data.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer":
        raise _refuse(tokenizer_json, f"pre-tokenizer is {(data.get('pre_tokenizer') or {}).get('type')!r}, not BertPreTokenizer")
    cls_token, sep_token = _specials(tokenizer_json, data.get("post_processor") or {})
    vocab_map = model.get("vocab") or {}
    ordered = sorted(vocab_map.items(), key=lambda item: int(item[1]))
    if [index for _, index in ordered] != list(range(len(ordered))):
        raise _refuse(tokenizer_json, "the vocabulary ids are not 0..N-1")
    tokens = tuple(token for token, _ in ordered)
    if any("\n" in token or token == "" for token in tokens):
        raise _refuse(tokenizer_json, "a vocabulary token is empty or holds a line break")
    unk = str(model.get("unk_token") or "[UNK]")
    for token in (unk, cls_token, sep_token):
        if token not in vocab_map:
            raise _refuse(tokenizer_json, f"special token {token!r} is not in the vocabulary")
    return WordPieceTokenizer(tokenizer_json, tokens, unk, cls_token, sep_token, int(model.get("max_input_chars_per_word") or 100))


def _specials(path: Path, post: dict[str, Any]) -> tuple[str, str]:
    """[CLS] and [SEP] of a single-text template ``[CLS] $A [SEP]`` (TemplateProcessing or BertProcessing)."""
    if post.get("type") == "BertProcessing":
        return str(post["cls"][0]), str(post["sep"][0])
    if post.get("type") == "TemplateProcessing":
        single = post.get("single") or []
        kinds = [next(iter(piece)) for piece in single]
        ids = [piece[kind].get("id") for piece, kind in zip(single, kinds, strict=True)]
        types = [piece[kind].get("type_id", 0) for piece, kind in zip(single, kinds, strict=True)]
        if kinds == ["SpecialToken", "Sequence", "SpecialToken"] and ids[1] == "A" and not any(types):
            return str(ids[0]), str(ids[2])
    raise _refuse(path, "the post-processor is not '[CLS] $A [SEP]'")


# --- the character table: the checkpoint's own normalizer and pre-tokenizer, per code point -----------------


# Markers the character table maps to (never left in the text the op sees): the table's format cannot map to ""
# nor hold a tab or a line break, and regular expressions over large classes cost ~0.5 ms per text to compile
# (the ops take patterns as inputs), so both are done by two tiny patterns over these markers instead.
DELETED, UNCOVERED = "\x01", "\x02"
_BREAKS = "[\\t\\n\\r]"  # whitespace the table cannot hold as a key: a space, by pattern


@dataclass(frozen=True)
class CharacterTable:
    mapping: tuple[tuple[str, str], ...]  # character -> its normalized, pre-tokenizer-spaced text (with markers)


def character_table(tokenizer: WordPieceTokenizer) -> CharacterTable:
    """Every assigned code point through the checkpoint's BertNormalizer, spaced as BertPreTokenizer splits;
    what the normalizer deletes becomes DELETED, a character no vocabulary token holds becomes UNCOVERED."""
    import unicodedata

    tokenizers = require("tokenizers", "export", "the ONNX tokenizer")
    loaded = tokenizers.Tokenizer.from_file(str(tokenizer.path))
    normalizer, pre = loaded.normalizer, loaded.pre_tokenizer
    covered = {c for token in tokenizer.vocab for c in token.removeprefix(_SUFFIX)} | {" "}
    kinds: dict[str, str] = {}

    def kind(char: str) -> str:
        # How BertPreTokenizer treats one character: "space" (split, dropped), "punct" (its own word), "word".
        if char not in kinds:
            words = [w for w, _ in pre.pre_tokenize_str(f"a{char}a")]
            kinds[char] = "space" if words == ["a", "a"] else "punct" if words == ["a", char, "a"] else "word"
        return kinds[char]

    mapping = []
    for code in range(_MAX_CODE_POINT):
        char = chr(code)
        if code == 0 or 0xD800 <= code < 0xE000 or char in "\t\n\r":  # NUL ends an ONNX Runtime string anyway  # surrogates never reach a tokenizer; breaks: by pattern
            continue
        normal = normalizer.normalize_str(char)
        if normal == char and char in covered and kind(char) == "word":
            continue  # the common case: kept as is
        if normal == char and unicodedata.category(char) == "Cn":
            continue  # unassigned: left to the op (keeps the table small; see docs/text-preprocess.md)
        pieces = []
        for piece in normal:
            what = kind(piece)
            if what == "space":
                pieces.append(" ")
            elif piece not in covered:
                pieces.append(f" {UNCOVERED} " if what == "punct" else UNCOVERED)
            else:
                pieces.append(f" {piece} " if what == "punct" else piece)
        spaced = "".join(pieces) or DELETED
        if spaced != char:
            mapping.append((char, spaced))
    return CharacterTable(tuple(mapping))


def _unknown_letter(tokenizer: WordPieceTokenizer) -> str:
    """A letter no vocabulary token holds (a one-letter word the op turns into [UNK])."""
    covered = {c for token in tokenizer.vocab for c in token}
    return next(chr(code) for code in range(0x100, _MAX_CODE_POINT) if chr(code).isalpha() and chr(code) not in covered
                and not 0x2E80 <= code < 0xA000)  # not a CJK character (its own word either way, but keep it plain)


# --- the graph ------------------------------------------------------------------------------------------------


def build_tokenizer_model(tokenizer: WordPieceTokenizer, table: CharacterTable, max_length: int,
                          outputs: dict[str, int], opset: int = 17) -> Any:
    """TEXT (string [batch, 1]) -> each of ``outputs`` (name -> ONNX element type) as [batch, longest]."""
    onnx = require("onnx", "export", "the ONNX tokenizer")
    h, tp = onnx.helper, onnx.TensorProto
    unknown = set(outputs) - set(OUTPUT_NAMES)
    if unknown:
        raise UserError(f"{tokenizer.path}: the model takes {sorted(unknown)}, which the ONNX tokenizer does not produce")
    consts = [
        h.make_tensor("zero1", tp.INT64, [1], [0]), h.make_tensor("one1", tp.INT64, [1], [1]),
        h.make_tensor("minus1", tp.INT64, [1], [-1]), h.make_tensor("max1", tp.INT64, [1], [max_length]),
        h.make_tensor("axis0", tp.INT64, [], [0]), h.make_tensor("empty", tp.STRING, [], [b""]),
        h.make_tensor("space", tp.STRING, [], [b" "]), h.make_tensor("any_char", tp.STRING, [], [b"(.)"]),
        h.make_tensor("breaks", tp.STRING, [], [_BREAKS.encode()]),
        h.make_tensor("deleted", tp.STRING, [], [b"\\x01"]),
        h.make_tensor("uncovered_word", tp.STRING, [], [b"[^ ]*\\x02[^ ]*"]),
        h.make_tensor("unknown_letter", tp.STRING, [], [_unknown_letter(tokenizer).encode()]),
    ]
    mapping = "\n".join(f"{key}\t{value}" for key, value in table.mapping)
    body_nodes = [
        h.make_node("Gather", ["texts", "i"], ["text"], axis=0),
        h.make_node("Expand", ["text", "one1"], ["text1"]),
        h.make_node("StringRegexReplace", ["text1", "breaks", "space"], ["spaced"], domain=CONTRIB),
        h.make_node("StringRegexSplitWithOffsets", ["spaced", "any_char", "any_char"], ["chars", "b", "e", "rows"], domain=CONTRIB),
        h.make_node("StringMapping", ["chars"], ["mapped"], domain=CONTRIB, map=mapping),
        h.make_node("StringJoin", ["mapped", "empty", "axis0"], ["joined"], domain=CONTRIB),
        h.make_node("Expand", ["joined", "one1"], ["joined1"]),
        h.make_node("StringRegexReplace", ["joined1", "deleted", "empty"], ["kept"], domain=CONTRIB),
        # A word holding a character no vocabulary token holds is one [UNK] to Hugging Face's WordPiece, while the
        # op emits the pieces before it and then [UNK]: such a word is replaced by one letter outside the
        # vocabulary, which the op maps to [UNK] alone.
        h.make_node("StringRegexReplace", ["kept", "uncovered_word", "unknown_letter"], ["normal"], domain=CONTRIB),
        # Only the outputs used: with its offset_mapping output left unread, the op corrupted ONNX Runtime's heap
        # inside the Loop (measured: a crash in free() after a few rows).
        h.make_node("BertTokenizer", ["normal"], ["ids", "types", "mask"], domain=CONTRIB,
                    vocab_file="\n".join(tokenizer.vocab), do_lower_case=0, strip_accents=0, tokenize_chinese_chars=0,
                    tokenize_punctuation=0, remove_control_chars=0, unk_token=tokenizer.unk_token,
                    cls_token=tokenizer.cls_token, sep_token=tokenizer.sep_token, suffix_indicator="##",
                    max_input_chars_per_word=tokenizer.max_input_chars_per_word, max_length=max_length,
                    truncation_strategy_name="longest_first"),
        h.make_node("Shape", ["ids"], ["count"]),
        h.make_node("Sub", ["max1", "count"], ["pad_count"]),
        h.make_node("Concat", ["zero1", "pad_count"], ["pads"], axis=0),
        *[h.make_node("Pad", [src, "pads"], [f"{src}_row"]) for src in ("ids", "mask", "types")],
        h.make_node("Identity", ["cond_in"], ["cond_out"]),
    ]
    row = [h.make_tensor_value_info(f"{src}_row", tp.INT64, [max_length]) for src in ("ids", "mask", "types")]
    body = h.make_graph(body_nodes, "tokenize_one",
                        [h.make_tensor_value_info("i", tp.INT64, []), h.make_tensor_value_info("cond_in", tp.BOOL, [])],
                        [h.make_tensor_value_info("cond_out", tp.BOOL, []), *row])
    nodes = [
        h.make_node("Reshape", [TEXT_INPUT, "minus1"], ["texts"]),
        h.make_node("Shape", ["texts"], ["batch1"]),
        h.make_node("Squeeze", ["batch1", "zero1"], ["batch"]),
        h.make_node("Loop", ["batch", ""], ["all_ids", "all_mask", "all_types"], body=body),
        # Cut the padded rows to the batch's longest text (at least one column for an empty batch).
        h.make_node("ReduceSum", ["all_mask", "one1"], ["lengths"], keepdims=0),
        h.make_node("ReduceMax", ["lengths"], ["longest0"], keepdims=1),
        h.make_node("Max", ["longest0", "one1"], ["longest"]),
    ]
    sources = {"input_ids": "all_ids", "attention_mask": "all_mask", "token_type_ids": "all_types"}
    graph_outputs = []
    for name, element in outputs.items():
        cut = f"{name}_int64"
        nodes.append(h.make_node("Slice", [sources[name], "zero1", "longest", "one1"], [cut if element != tp.INT64 else name]))
        if element != tp.INT64:
            nodes.append(h.make_node("Cast", [cut], [name], to=element))
        graph_outputs.append(h.make_tensor_value_info(name, element, ["batch", "sequence"]))
    graph = h.make_graph(nodes, "wordpiece_tokenizer", [h.make_tensor_value_info(TEXT_INPUT, tp.STRING, ["batch", 1])],
                         graph_outputs, initializer=consts)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset), h.make_opsetid(CONTRIB, 1)],
                         producer_name="repo-builder")
    model.ir_version = min(model.ir_version, 9)  # readable by the onnxruntime of older Triton releases
    return model


def op_library_path() -> Path:
    """This machine's onnxruntime-extensions custom-op library (the one ONNX Runtime registers)."""
    extensions = require("onnxruntime_extensions", "export", "the ONNX tokenizer")
    return Path(extensions.get_library_path())


def tokenizer_model_bytes(tokenizer_dir: Path, max_length: int, outputs: dict[str, int]) -> bytes:
    """The tokenizer step's model.onnx, serialized, from a saved fast tokenizer folder (its tokenizer.json)."""
    tokenizer_json = tokenizer_dir / "tokenizer.json"
    if not tokenizer_json.is_file():
        raise UserError(f"{tokenizer_dir}: no tokenizer.json; --preprocess onnx needs a saved fast tokenizer")
    tokenizer = read_wordpiece_tokenizer(tokenizer_json)
    model = build_tokenizer_model(tokenizer, character_table(tokenizer), max_length, outputs)
    return bytes(model.SerializeToString())


if __name__ == "__main__":  # pragma: no cover - a quick look: python -m repo_builder.export.tokenizer_onnx FOLDER
    print(len(character_table(read_wordpiece_tokenizer(Path(sys.argv[1]) / "tokenizer.json")).mapping))
