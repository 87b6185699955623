"""The token-classification reference: transformers' own pipeline on the checkpoint vs the served entities.

Entity lists must be identical in labels, offsets, words and keys; scores agree within SCORE_TOLERANCE.
transformers is imported lazily (only when the reference runs).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError, require

SCORE_TOLERANCE = 1e-4
Entities = list[dict[str, Any]]


def reference_texts(count: int, seed: int = 0) -> list[str]:
    """``count`` texts for the check: empty, one character, sub-words, unknown characters (non-Latin scripts,
    emoji, accents), punctuation glued to words, repeated spaces and texts near the length limit."""
    import random

    fixed = ["", "a", "X", "John Smith lives in New York and works at Microsoft.", "playing played plays",
             "über café naïve façade", "日本語のテキスト", "emoji 😀 in 🚀 text", "hello,world...!!", "  spaced   out  ",
             "Ünïcödé and ascii mixed", "2026-11-25 at 18:00", "tokenizers split words into wordpieces such as play and ##ing"]
    vocabulary = ("the quick brown fox jumps over lazy dog triton serves models from repository onnx runtime tensorrt "
                  "Paris Berlin Marie Curie Acme Corp playing wonderful terrible ensemble über Zürich 東京 😀 ! , . ? - "
                  "xyzzy qwerty 2026 1 2 3").split()
    rng = random.Random(seed)
    texts = list(fixed)
    while len(texts) < count:
        # At most 16 words, so a text fits the tiny test model's 128 tokens even spelt out letter by letter.
        words = [rng.choice(vocabulary) for _ in range(rng.choice((1, 2, 3, 8, 12, 16)))]
        joiner = rng.choice((" ", " ", " ", "")) if len(words) <= 3 else rng.choice((" ", " ", "  ", " , "))
        texts.append(joiner.join(words))
    return texts[:count]


def load_pipeline(model_dir: Path, aggregation: str, ignore_labels: Sequence[str], threads: int | None = None) -> Callable[[list[str]], list[Entities]]:
    """transformers' token-classification pipeline on CPU; returns a function of a batch of texts."""
    torch = require("torch", "export", "the token-classification reference")
    transformers = require("transformers", "export", "the token-classification reference")
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        pipe = transformers.pipeline(
            "token-classification", model=str(model_dir), aggregation_strategy=aggregation, ignore_labels=list(ignore_labels),
            device="cpu",
        )
    except Exception as exc:  # a folder transformers cannot load: say which
        raise UserError(f"{model_dir}: transformers' token-classification pipeline cannot load it ({exc})") from None

    def run(texts: list[str]) -> list[Entities]:
        results = pipe(list(texts))
        return [[{k: (float(v) if k == "score" else v) for k, v in entity.items()} for entity in row] for row in results]

    return run


def compare_entities(expected: Entities, actual: Entities, tolerance: float = SCORE_TOLERANCE) -> tuple[float, str | None]:
    """(largest score difference, the first disagreement or None): keys, labels, words and offsets exactly."""
    worst = 0.0
    if len(expected) != len(actual):
        return float("inf"), f"{len(actual)} entities, the pipeline returns {len(expected)}"
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if list(want) != list(got):
            return float("inf"), f"entity {index}: keys {list(got)}, the pipeline's {list(want)}"
        exact = {k: v for k, v in want.items() if k != "score"}
        if exact != {k: v for k, v in got.items() if k != "score"}:
            return float("inf"), f"entity {index}: {json.dumps(got, ensure_ascii=False)}, the pipeline's {json.dumps(want, ensure_ascii=False)}"
        worst = max(worst, abs(float(want["score"]) - float(got["score"])))
    if worst > tolerance:
        return worst, f"score differs by {worst:.2g} (> {tolerance:g})"
    return worst, None
