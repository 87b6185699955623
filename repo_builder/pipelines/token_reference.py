"""The token-classification reference: transformers' own pipeline on the checkpoint vs the served entities.

Entity lists must be identical in labels, offsets, words and keys; scores agree within SCORE_TOLERANCE.
transformers is imported lazily (only when the reference runs).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError, require
from repo_builder.pipelines.family import InProcess, ReferenceReport, ReferenceRun

SCORE_TOLERANCE = 1e-4
Entities = list[dict[str, Any]]


def reference_texts(count: int, seed: int = 0) -> list[str]:
    """``count`` texts for the check: empty, one character, sub-words, unknown characters (non-Latin scripts,
    emoji, accents), punctuation glued to words, repeated spaces and texts near the length limit."""
    import random

    fixed = ["", "a", "X", "John Smith lives in New York and works at Microsoft.", "playing played plays",
             "über café naïve façade", "日本語のテキスト", "emoji 😀 in 🚀 text", "hello,world...!!", "  spaced   out  ",
             "Ünïcödé and ascii mixed", "2026-11-25 at 18:00", "tokenizers split words into wordpieces such as play and ##ing"]
    vocabulary = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "triton", "serves", "models", "from", "repository", "onnx", "runtime", "tensorrt", "Paris", "Berlin", "Marie", "Curie", "Acme", "Corp", "playing", "wonderful", "terrible", "ensemble", "über", "Zürich", "東京", "😀", "!", ",", ".", "?", "-", "xyzzy", "qwerty", "2026", "1", "2", "3"]
    rng = random.Random(seed)
    texts = list(fixed)
    while len(texts) < count:
        # At most 16 words, so a text fits the tiny test model's 128 tokens even spelt out letter by letter.
        words = [rng.choice(vocabulary) for _ in range(rng.choice((1, 2, 3, 8, 12, 16)))]
        joiner = rng.choice((" ", " ", " ", "")) if len(words) <= 3 else rng.choice((" ", " ", "  ", " , "))
        texts.append(joiner.join(words))
    return texts[:count]


class TokenPipeline:
    """transformers' token-classification pipeline on CPU, called on a batch of texts (entities as plain data)."""

    def __init__(self, model_dir: Path, aggregation: str, ignore_labels: Sequence[str], threads: int | None = None) -> None:
        torch = require("torch", "export", "the token-classification reference")
        transformers = require("transformers", "export", "the token-classification reference")
        if threads is not None:
            torch.set_num_threads(threads)
        try:
            self.pipe = transformers.pipeline("token-classification", model=str(model_dir), aggregation_strategy=aggregation,
                                              ignore_labels=list(ignore_labels), device="cpu")
        except Exception as exc:  # a folder transformers cannot load: say which
            raise UserError(f"{model_dir}: transformers' token-classification pipeline cannot load it ({exc})") from None
        self.tokenizer = self.pipe.tokenizer
        config = self.pipe.model.config
        limits = [int(v) for v in (getattr(config, "max_position_embeddings", None), self.tokenizer.model_max_length)
                  if isinstance(v, int) and 0 < v < 1_000_000]
        self.max_length = min(limits) if limits else None

    def __call__(self, texts: Sequence[str]) -> list[Entities]:
        results = self.pipe(list(texts))
        return [[{k: (float(v) if k == "score" else v) for k, v in entity.items()} for entity in row] for row in results]

    def token_count(self, text: str) -> int:
        return len(self.tokenizer(text)["input_ids"])


def load_pipeline(model_dir: Path, aggregation: str, ignore_labels: Sequence[str], threads: int | None = None) -> TokenPipeline:
    return TokenPipeline(model_dir, aggregation, ignore_labels, threads)


def entities_request(texts: Sequence[str]) -> dict[str, Any]:
    """The ensemble's input for a batch of texts."""
    import numpy as np

    return {"TEXT": np.array([[t.encode("utf-8")] for t in texts], dtype=np.object_)}


def in_process_pipeline(model_dir: Path, threads: int) -> InProcess:
    """bench's reference: the pipeline (default aggregation of the family, simple) in this process."""
    pipe = TokenPipeline(model_dir, "simple", ("O",), threads)
    return InProcess(run=pipe, threads=threads)


def long_texts(count: int) -> list[str]:
    """Texts far over any 512-token model: the pipeline truncates them, a refusing repository refuses them."""
    return [" ".join(["Paris", "Marie", "Curie", "xyzzy", "2026", "über"][(i + j) % 6] for j in range(600)) for i in range(count)]


def check_entities(
    run: ReferenceRun, aggregation: str, ignore_labels: Sequence[str], long_policy: str, max_length: int | None
) -> ReferenceReport:
    """The pipeline on at least ``run.minimum_cases`` texts against the served ensemble: identical entity lists,
    scores within SCORE_TOLERANCE. Texts over the maximum length: refused one by one (``refuse``), or in the
    cases (``truncate``: the pipeline without stride truncates as the repository does)."""
    pipe = TokenPipeline(run.model, aggregation, ignore_labels)
    limit = max_length or pipe.max_length
    texts = reference_texts(max(run.minimum_cases, 200))
    if long_policy == "truncate":
        texts += long_texts(5)
    fits = [t for t in texts if limit is None or pipe.token_count(t) <= limit]
    cases = fits if long_policy == "refuse" else texts
    expected = pipe(cases)
    failures: list[str] = []
    worst = 0.0
    for start in range(0, len(cases), max(run.max_batch_size, 1)):
        batch = cases[start:start + run.max_batch_size]
        rows = run.infer(entities_request(batch))["entities"].reshape(-1)
        for offset, row in enumerate(rows):
            got = json.loads(row.decode("utf-8") if isinstance(row, bytes) else str(row))
            difference, problem = compare_entities(expected[start + offset], got)
            if problem is None:
                worst = max(worst, difference)
            else:
                failures.append(f"text {start + offset} {batch[offset][:40]!r}: {problem}")
    refused = _refusals(run, long_texts(2)) if long_policy == "refuse" else 0
    if long_policy == "refuse" and refused != 2:
        failures.append(f"{2 - refused} of 2 texts over {limit} tokens were answered, not refused")
    figures = {"texts": float(len(cases)), "entities": float(sum(len(e) for e in expected)), "max_score_diff": worst,
               "mismatched_texts": float(len(failures)), "refused_long_texts": float(refused)}
    bounds = {"max_score_diff": f"<= {SCORE_TOLERANCE:g}", "mismatched_texts": "== 0",
              "texts": f">= {run.minimum_cases}"}
    passed = not failures and len(cases) >= run.minimum_cases
    return ReferenceReport("token-classifier", len(cases), passed, figures, bounds, tuple(failures[:3]))


def _refusals(run: ReferenceRun, texts: Sequence[str]) -> int:
    refused = 0
    for text in texts:
        try:
            run.infer(entities_request([text]))
        except Exception as exc:  # tritonclient's error for the refused request
            refused += "longer than" in str(exc)
    return refused


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


def import_entities(path: Path) -> Any:
    """The generated entities.py (a built postprocess step's, or a rendered template) as a module, to run or
    time the served postprocessing in process; it imports only numpy (and tokenizers in load_decoder)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"token_entities_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        raise UserError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
