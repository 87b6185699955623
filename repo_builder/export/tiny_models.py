"""A tiny BERT sequence classifier built offline: random weights and a WordPiece tokenizer trained on the spot.

Tests, the demo and the build pipeline use it as a stand-in for a real Hugging Face model folder.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

from repo_builder.errors import require

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
MAX_POSITIONS = 128
# A small fixed corpus, so the vocabulary (and hence the saved folder) is the same on every machine.
CORPUS = (
    "the quick brown fox jumps over the lazy dog",
    "triton serves models from a repository of versioned folders",
    "this movie was wonderful and the actors were great",
    "this movie was terrible and far too long",
    "an ensemble chains preprocessing the model and postprocessing",
    "tokenizers split words into wordpieces such as play and ##ing",
    "numbers like 1 2 3 and 2026 appear too, with punctuation!",
    "onnx runtime and tensorrt run exported graphs on cpu or gpu",
)


def train_vocabulary(tokenizers: Any) -> dict[str, int]:
    """Train WordPiece on CORPUS, then make the vocabulary canonical.

    The Rust trainer breaks frequency ties in hash order, which changes from process to process (measured:
    257, 258 or 256 tokens for the same corpus), so only the tie-free part of what it learns is kept: the
    alphabet (as word starts and ``##`` continuations) plus every whole corpus word, sorted after the
    special tokens. Any text still tokenizes: unknown words fall back to characters.
    """
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    trainer = tokenizers.trainers.WordPieceTrainer(
        vocab_size=1000, min_frequency=1, special_tokens=list(SPECIAL_TOKENS), show_progress=False
    )
    tokenizer.train_from_iterator(list(CORPUS), trainer=trainer)
    learned = set(tokenizer.get_vocab()) - set(SPECIAL_TOKENS)
    # Plus ASCII letters, digits and punctuation, so arbitrary English text rarely maps to [UNK].
    characters = {token.removeprefix("##") for token in learned if len(token.removeprefix("##")) == 1}
    characters |= set(string.ascii_lowercase + string.digits + string.punctuation)
    alphabet = characters | {f"##{char}" for char in characters}
    words = {
        word
        for line in CORPUS
        for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(tokenizer.normalizer.normalize_str(line))
    }
    ordered = [*SPECIAL_TOKENS, *sorted(alphabet | words)]
    return {token: index for index, token in enumerate(ordered)}


def make_tiny_text_classifier(
    out_dir: Path, *, num_labels: int = 3, seed: int = 0, with_token_type_ids: bool = True, with_head: bool = True
) -> Path:
    """Save a tiny ``BertForSequenceClassification`` and its fast tokenizer to ``out_dir``; returns it.

    Deterministic for a seed. Without token type ids the tokenizer does not emit them and the model has a
    single token type, as DistilBERT-like models behave. ``with_head=False`` saves a bare ``BertModel``
    (an encoder without a classification head), as many checkpoints on the Hub are.
    """
    torch = require("torch", "export", "building the tiny text classifier")
    transformers = require("transformers", "export", "building the tiny text classifier")
    tokenizers = require("tokenizers", "export", "building the tiny text classifier")

    tokenizer = tokenizers.Tokenizer(
        tokenizers.models.WordPiece(vocab=train_vocabulary(tokenizers), unk_token="[UNK]")
    )
    tokenizer.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    pair = "[CLS] $A [SEP] $B:1 [SEP]:1" if with_token_type_ids else "[CLS] $A [SEP] $B [SEP]"
    tokenizer.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair=pair, special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
    )
    tokenizer.decoder = tokenizers.decoders.WordPiece()

    input_names = (
        ["input_ids", "token_type_ids", "attention_mask"]
        if with_token_type_ids
        else ["input_ids", "attention_mask"]
    )
    # model_input_names must be explicit: the generic fast tokenizer otherwise drops token_type_ids.
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_input_names=input_names,
        model_max_length=MAX_POSITIONS,
    )
    labels = {index: f"label_{index}" for index in range(num_labels)}
    config = transformers.BertConfig(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=MAX_POSITIONS,
        type_vocab_size=2 if with_token_type_ids else 1,
        pad_token_id=tokenizer.token_to_id("[PAD]"),
        num_labels=num_labels,
        id2label=labels,
        label2id={name: index for index, name in labels.items()},
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model_class = transformers.BertForSequenceClassification if with_head else transformers.BertModel
        model = model_class(config).eval()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    fast.save_pretrained(out_dir)
    return out_dir


def main(argv: list[str] | None = None) -> int:
    """``python -m repo_builder.export.tiny_models OUT``: the tiny classifier as a model folder, offline.

    A text model for trying repo-builder (or its CI) with no network and no Hub download: random weights,
    so its labels mean nothing; the pipeline, tokenizer and serving are real.
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m repo_builder.export.tiny_models",
        description="Save a tiny BERT sequence classifier (random weights) and its tokenizer to OUT, offline.",
    )
    parser.add_argument("out", type=Path, help="folder to create (must be new or empty)")
    parser.add_argument("--num-labels", type=int, default=3, help="number of classes (default: 3)")
    parser.add_argument("--seed", type=int, default=0, help="weights' random seed (default: 0)")
    args = parser.parse_args(argv)
    if args.num_labels < 1:
        parser.error("--num-labels must be >= 1")
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        parser.error(f"{args.out}: exists and is not an empty folder; choose a new folder")
    print(make_tiny_text_classifier(args.out, num_labels=args.num_labels, seed=args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
