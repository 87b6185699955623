"""A tiny BERT token classifier built offline: the tiny text model's trained WordPiece vocabulary, random weights.

Tests, the NER benchmark and the demo use it as a stand-in for a fine-tuned NER checkpoint. Its head is
scaled up so tokens get confident, varied labels: with B-/I- labels, an untagged one and ``O``, every
aggregation strategy has entities to group, sub-words to merge and groups to drop.
"""

from __future__ import annotations

from pathlib import Path

from repo_builder.errors import require
from repo_builder.export.tiny_models import make_tiny_text_classifier

# B-/I- pairs, a label without the prefix (grouped by its whole name) and O (ignored by default).
TINY_NER_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "MISC")
HEAD_STD = 1.0  # BERT's initializer_range (0.02) leaves every token near-uniform over the labels


def make_tiny_token_classifier(out_dir: Path, *, seed: int = 0, labels: tuple[str, ...] = TINY_NER_LABELS) -> Path:
    """Save a tiny ``BertForTokenClassification`` and its fast tokenizer to ``out_dir``; returns it.

    Deterministic for a seed: the encoder is the tiny text model's (same seed), the head is drawn from it too.
    """
    torch = require("torch", "export", "building the tiny token classifier")
    transformers = require("transformers", "export", "building the tiny token classifier")
    out_dir = Path(out_dir)
    make_tiny_text_classifier(out_dir, seed=seed, with_head=False)  # the encoder and its tokenizer
    config = transformers.AutoConfig.from_pretrained(str(out_dir), local_files_only=True)
    config.num_labels = len(labels)
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: index for index, label in enumerate(labels)}
    config.architectures = ["BertForTokenClassification"]
    encoder = transformers.BertModel.from_pretrained(str(out_dir), local_files_only=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.BertForTokenClassification(config).eval()
        model.bert.load_state_dict(encoder.state_dict(), strict=False)  # BertModel has a pooler; this one has none
        torch.nn.init.normal_(model.classifier.weight, std=HEAD_STD)
    model.save_pretrained(str(out_dir))
    return out_dir


def main(argv: list[str] | None = None) -> int:
    """``python -m repo_builder.export.tiny_token_classifier OUT``: the tiny NER model as a model folder, offline.

    For trying ``build token-classifier`` with no network and no Hub download: random weights, so its entities
    mean nothing; the tokenizer, the pre/post steps and the serving are real.
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m repo_builder.export.tiny_token_classifier",
        description="Save a tiny BERT token classifier (NER; random weights) and its tokenizer to OUT, offline.",
    )
    parser.add_argument("out", type=Path, help="folder to create (must be new or empty)")
    parser.add_argument("--labels", default=",".join(TINY_NER_LABELS),
                        help=f"comma-separated labels, O first (default: {','.join(TINY_NER_LABELS)})")
    parser.add_argument("--seed", type=int, default=0, help="weights' random seed (default: 0)")
    args = parser.parse_args(argv)
    labels = tuple(label.strip() for label in args.labels.split(","))
    if not all(labels) or len(set(labels)) != len(labels):
        parser.error("--labels must be distinct, non-empty names separated by commas")
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        parser.error(f"{args.out}: exists and is not an empty folder; choose a new folder")
    print(make_tiny_token_classifier(args.out, seed=args.seed, labels=labels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
