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

The ASCII fast path: on ASCII the op's own normalization (set as the checkpoint's) was found equal to Hugging
Face's except on DEL, and a row tokenized by the op alone costs less than half as much. ``fast_path`` decides
per checkpoint, at build time, which ASCII characters qualify by running the op alone against the checkpoint's
tokenizer (every ASCII character in several contexts, then random texts); a word character also needs itself
and its ``##`` form in the vocabulary. One ``StringRegexReplace`` + ``StringEqual`` over the whole batch marks
the rows made of those characters only, and an ``If`` per row sends them to the op alone, every other row to
the steps above. A checkpoint on which the op differs on a letter, a digit or the space gets no fast path.

The op takes one text; a ``Loop`` runs it per row, pads each to ``max_length`` and the batch is then cut to
its longest row. A tokenizer the op cannot reproduce (not BertNormalizer + BertPreTokenizer + WordPiece +
``[CLS] $A [SEP]``) is refused with one line naming its tokenizer.json. onnxruntime-extensions and
tokenizers are imported inside functions (the export extra).
"""

from __future__ import annotations

import json
import string
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError, require

CONTRIB = "ai.onnx.contrib"  # onnxruntime-extensions' op domain
_SUFFIX = "##"
OUTPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
TEXT_INPUT = "TEXT"
_MAX_CODE_POINT = 0x110000
# A text over max_length x this many characters is refused before any tokenizing work (the graph cannot take a
# prefix and prove it exact, as the Python step does): 131,072 characters at 128 tokens, ~0.1 s and ~20 MB.
CHARS_PER_TOKEN = 1024


@dataclass(frozen=True)
class TextLimits:
    """What the graph refuses before it tokenizes: characters per text and per request (a request is one
    execution: the step has no dynamic batcher, so a refusal fails its own request only)."""

    text_chars: int
    request_chars: int


@dataclass(frozen=True)
class WordPieceTokenizer:
    """What the graph needs from a saved fast BERT tokenizer (tokenizer.json)."""

    path: Path  # the tokenizer.json it was read from (for messages)
    vocab: tuple[str, ...]  # tokens by id
    unk_token: str
    cls_token: str
    sep_token: str
    max_input_chars_per_word: int
    # BertNormalizer's settings, for the op's own normalization on the ASCII fast path.
    lowercase: bool = True
    strip_accents: bool = True
    chinese_chars: bool = True
    special_tokens: frozenset[str] = frozenset()  # added tokens marked special ([CLS], [UNK], ...): not WordPiece pieces


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
    normalizer = data["normalizer"]
    lowercase = bool(normalizer.get("lowercase", True))
    strip = normalizer.get("strip_accents")  # None: follows lowercase, as in BertNormalizer
    return WordPieceTokenizer(tokenizer_json, tokens, unk, cls_token, sep_token, int(model.get("max_input_chars_per_word") or 100),
                              lowercase, lowercase if strip is None else bool(strip), bool(normalizer.get("handle_chinese_chars", True)),
                              frozenset(str(t.get("content")) for t in data.get("added_tokens") or () if isinstance(t, dict) and t.get("special")))


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
    # Special tokens are never WordPiece pieces: a letter only [UNK] or [MASK] holds (an uppercase K over a lowercase
    # vocabulary) still fails WordPiece, so its word must become one [UNK] here too.
    covered = {c for token in tokenizer.vocab if token not in tokenizer.special_tokens for c in token.removeprefix(_SUFFIX)} | {" "}
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


# --- the ASCII fast path: the op's own normalization where it was found equal to the checkpoint's -------------


@dataclass(frozen=True)
class FastPath:
    """The ASCII characters on which the op, normalizing by itself, gives Hugging Face's ids: a row made of these
    alone is one op call instead of the per-character path (which costs ~2x as much per text)."""

    codes: tuple[int, ...]  # ascending code points

    def outside(self) -> str:
        """A regular expression matching one character not among ``codes`` (kept tiny: the op compiles it per call)."""
        ranges: list[list[int]] = []
        for code in self.codes:
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
        return "[^" + "".join(f"\\x{a:02x}" if a == b else f"\\x{a:02x}-\\x{b:02x}" for a, b in ranges) + "]"


_CHECK_MAX_LENGTH = 1024  # above any check text's length: whole sequences are compared (a far larger one costs per call)
_NEEDED = string.ascii_letters + string.digits + " "  # without all of these, no fast path
_SENTENCES = ("The quick brown fox jumps over the lazy dog.", "Don't stop-believing... ok?! (yes) [no] {maybe} #1 @home",
              "  tabs\tand\nnewlines\r\n  A.B.C. 3.14159 e=mc^2 <tag attr=\"x\"> a_b `c` ~d | e \\ f / g; h: i, j% k& l* m+ n$")


def _tokenizer_op(tokenizer: WordPieceTokenizer, source: str, outputs: list[str], max_length: int, normalize: bool) -> Any:
    """The extensions' ``BertTokenizer`` node: its own normalization set as the checkpoint's, or all off."""
    onnx = require("onnx", "export", "the ONNX tokenizer")
    # Only the outputs used: with its offset_mapping output left unread, the op corrupted ONNX Runtime's heap
    # inside the Loop (measured: a crash in free() after a few rows).
    return onnx.helper.make_node(
        "BertTokenizer", [source], outputs, domain=CONTRIB, vocab_file="\n".join(tokenizer.vocab),
        do_lower_case=int(normalize and tokenizer.lowercase), strip_accents=int(normalize and tokenizer.strip_accents),
        tokenize_chinese_chars=int(normalize and tokenizer.chinese_chars), tokenize_punctuation=int(normalize),
        remove_control_chars=int(normalize), unk_token=tokenizer.unk_token, cls_token=tokenizer.cls_token,
        sep_token=tokenizer.sep_token, suffix_indicator=_SUFFIX, max_input_chars_per_word=tokenizer.max_input_chars_per_word,
        max_length=max_length, truncation_strategy_name="longest_first")


def _check_texts(char: str, limits: set[int], long_words: bool) -> list[str]:
    """One ASCII character in the contexts where normalizing, splitting or WordPiece could treat it otherwise."""
    texts = [char, f"a{char}a", f"{char}{char}", f" {char} ", f"1{char}2", f"A{char}B", f"x{char}", f"{char}x", f"\t{char}\n",
             f"{char}\r\n{char}", f"Hello{char}World 42{char}"]
    for limit in limits:  # a word's length around the per-word limit (the op's default and the checkpoint's)
        texts += [char * (limit + 1), "b" + char * limit]
        if long_words:  # ~4 ms each in the op (its WordPiece is cubic in a word's length): a few characters only
            texts += [char * (limit - 1), char * limit, "a" * (limit - 1) + char]
    return texts


def fast_path(tokenizer: WordPieceTokenizer, count: int = 400) -> FastPath | None:
    """The ASCII characters the op's own normalization handles as the checkpoint does, or None (no fast path).

    Measured, not assumed: the op runs alone on every ASCII character in several contexts and on ``count``
    random texts, against the checkpoint's own tokenizer. A word character also needs itself and its ``##``
    form in the vocabulary: the op's WordPiece then never fails mid-word, where it would emit the pieces
    before [UNK] while Hugging Face gives one [UNK] for the whole word. Without every letter, digit and the
    space there is no fast path: most text would take the other path anyway."""
    import random

    import numpy as np

    onnx = require("onnx", "export", "the ONNX tokenizer")
    onnxruntime = require("onnxruntime", "export", "the ONNX tokenizer")
    tokenizers = require("tokenizers", "export", "the ONNX tokenizer")
    h, tp = onnx.helper, onnx.TensorProto
    graph = h.make_graph([_tokenizer_op(tokenizer, "text", ["ids", "types", "mask"], _CHECK_MAX_LENGTH, normalize=True)],
                         "fast_path_check", [h.make_tensor_value_info("text", tp.STRING, [1])],
                         [h.make_tensor_value_info(name, tp.INT64, [None]) for name in ("ids", "types", "mask")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(CONTRIB, 1)])
    model.ir_version = min(model.ir_version, 9)
    options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(str(op_library_path()))
    session = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    reference = tokenizers.Tokenizer.from_file(str(tokenizer.path))
    reference.no_truncation()
    reference.no_padding()
    vocab = set(tokenizer.vocab)

    def agree(texts: list[str]) -> bool:
        for text, expected in zip(texts, reference.encode_batch(texts), strict=True):
            ids, types, mask = (out.tolist() for out in session.run(None, {"text": np.array([text], dtype=object)}))
            if ids != expected.ids or types != expected.type_ids or mask != expected.attention_mask:
                return False
        return True

    limits = {tokenizer.max_input_chars_per_word, 100}
    codes = []
    for code in range(1, 0x80):  # NUL ends an ONNX Runtime string: never seen, never allowed
        char = chr(code)
        normal = reference.normalizer.normalize_str(char)
        in_words = len(reference.pre_tokenizer.pre_tokenize_str(f"a{normal}a")) == 1
        if in_words and not all(c in vocab and _SUFFIX + c in vocab for c in normal):
            continue
        if agree(_check_texts(char, limits, long_words=char in "aZ5" or not in_words)):
            codes.append(code)
    if not set(map(ord, _NEEDED)) <= set(codes):
        return None
    allowed = "".join(map(chr, codes))
    rng = random.Random(0)
    texts = [text for text in _SENTENCES if not set(text) - set(allowed)]
    while len(texts) < count:  # words of letters and digits, every allowed character mixed in
        texts.append("".join(rng.choice(allowed) if rng.random() < 0.3 else rng.choice(_NEEDED + "    ")
                             for _ in range(rng.randint(1, 300))))
    return FastPath(tuple(codes)) if agree(texts) else None


# --- the graph ------------------------------------------------------------------------------------------------


def _limit_nodes(limits: TextLimits) -> tuple[list[Any], list[Any]]:
    """(initializers, nodes) that pass ``texts`` on as ``checked_texts``, or fail the run before any tokenizing.

    An ONNX graph cannot raise an error of its own: a Reshape to one element more than it has fails, and ONNX
    Runtime's message (which Triton passes to the client) names the failing node, so the node's name is the
    refusal. Shape inference cannot see the impossible shape (it is computed), so the model still loads."""
    onnx = require("onnx", "export", "the ONNX tokenizer")
    h, tp = onnx.helper, onnx.TensorProto
    consts = [h.make_tensor("text_chars", tp.INT64, [], [limits.text_chars]),
              h.make_tensor("request_chars", tp.INT64, [], [limits.request_chars])]

    def refusal(reason: str, flag: str, source: str, target: str) -> list[Any]:
        refuse = h.make_graph([
            h.make_node("Shape", [source], [f"{flag}_n"]), h.make_node("Add", [f"{flag}_n", "one1"], [f"{flag}_n1"]),
            h.make_node("Reshape", [source, f"{flag}_n1"], [f"{flag}_refused"], name=reason),
        ], f"{flag}_refuse", [], [h.make_tensor_value_info(f"{flag}_refused", tp.STRING, None)])
        keep = h.make_graph([h.make_node("Identity", [source], [f"{flag}_kept"])], f"{flag}_keep", [],
                            [h.make_tensor_value_info(f"{flag}_kept", tp.STRING, None)])
        return [h.make_node("If", [flag], [target], then_branch=refuse, else_branch=keep)]

    text_reason = (f"{TEXT_INPUT}: a text of this request is over this step's limit of {limits.text_chars} characters "
                   "per text, refused before tokenizing (--preprocess python truncates longer texts)")
    request_reason = (f"{TEXT_INPUT}: this request's texts hold over {limits.request_chars} characters, this step's "
                      "limit per request (rebuild with --max-request-bytes N to raise it), refused before tokenizing")
    nodes = [
        h.make_node("StringLength", ["texts"], ["text_lengths"], domain=CONTRIB),
        h.make_node("ReduceMax", ["text_lengths"], ["longest_text"], keepdims=0),
        h.make_node("Greater", ["longest_text", "text_chars"], ["text_over"]),
        *refusal(text_reason, "text_over", "texts", "texts_within"),
        h.make_node("ReduceSum", ["text_lengths"], ["request_length"], keepdims=0),
        h.make_node("Greater", ["request_length", "request_chars"], ["request_over"]),
        *refusal(request_reason, "request_over", "texts_within", "checked_texts"),
    ]
    return consts, nodes


def build_tokenizer_model(tokenizer: WordPieceTokenizer, table: CharacterTable, max_length: int,
                          outputs: dict[str, int], opset: int = 17, fast: FastPath | None = None,
                          limits: TextLimits | None = None) -> Any:
    """TEXT (string [batch, 1]) -> each of ``outputs`` (name -> ONNX element type) as [batch, longest]; with
    ``fast`` (see ``fast_path``), a row made of its characters alone is tokenized by the op's own normalization;
    with ``limits``, a request over them fails before any tokenizing (``_limit_nodes``)."""
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
    exact = [
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
        _tokenizer_op(tokenizer, "normal", ["ids", "types", "mask"], max_length, normalize=False),
    ]
    tokenize: list[Any] = exact
    if fast is not None:
        # Per row: the one-op fast path when the row holds only the fast path's characters, else the exact path.
        consts.append(h.make_tensor("outside_fast", tp.STRING, [], [fast.outside().encode()]))
        fast_branch = h.make_graph(
            [_tokenizer_op(tokenizer, "text1", ["fast_ids", "fast_types", "fast_mask"], max_length, normalize=True)], "fast", [],
            [h.make_tensor_value_info(f"fast_{name}", tp.INT64, [None]) for name in ("ids", "types", "mask")])
        exact_branch = h.make_graph(exact, "exact", [], [h.make_tensor_value_info(name, tp.INT64, [None]) for name in ("ids", "types", "mask")])
        tokenize = [
            h.make_node("Gather", ["fast_rows", "i"], ["fast_row"], axis=0),
            h.make_node("If", ["fast_row"], ["ids", "types", "mask"], then_branch=fast_branch, else_branch=exact_branch),
        ]
    body_nodes = [
        h.make_node("Gather", ["checked_texts", "i"], ["text"], axis=0),
        h.make_node("Expand", ["text", "one1"], ["text1"]),
        *tokenize,
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
    nodes = [h.make_node("Reshape", [TEXT_INPUT, "minus1"], ["texts" if limits is not None else "checked_texts"])]
    if limits is not None:
        limit_consts, limit_nodes = _limit_nodes(limits)
        consts += limit_consts
        nodes += limit_nodes
    nodes += [
        h.make_node("Shape", ["checked_texts"], ["batch1"]),
        h.make_node("Squeeze", ["batch1", "zero1"], ["batch"]),
    ]
    if fast is not None:
        # Which rows hold only fast-path characters: once for the whole batch (the pattern is compiled per call);
        # replacing the first other character is enough to tell.
        nodes += [
            h.make_node("StringRegexReplace", ["checked_texts", "outside_fast", "empty"], ["first_removed"], domain=CONTRIB,
                        global_replace=0),
            h.make_node("StringEqual", ["checked_texts", "first_removed"], ["fast_rows"], domain=CONTRIB),
        ]
    nodes += [
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


def tokenizer_model_bytes(tokenizer_dir: Path, max_length: int, outputs: dict[str, int], limits: TextLimits | None = None) -> bytes:
    """The tokenizer step's model.onnx, serialized, from a saved fast tokenizer folder (its tokenizer.json)."""
    tokenizer_json = tokenizer_dir / "tokenizer.json"
    if not tokenizer_json.is_file():
        raise UserError(f"{tokenizer_dir}: no tokenizer.json; --preprocess onnx needs a saved fast tokenizer")
    tokenizer = read_wordpiece_tokenizer(tokenizer_json)
    model = build_tokenizer_model(tokenizer, character_table(tokenizer), max_length, outputs, fast=fast_path(tokenizer),
                                  limits=limits)
    return bytes(model.SerializeToString())


if __name__ == "__main__":  # pragma: no cover - a quick look: python -m repo_builder.export.tokenizer_onnx FOLDER
    _tokenizer = read_wordpiece_tokenizer(Path(sys.argv[1]) / "tokenizer.json")
    _fast = fast_path(_tokenizer)
    print(len(character_table(_tokenizer).mapping), _fast.outside() if _fast else "no fast path")
