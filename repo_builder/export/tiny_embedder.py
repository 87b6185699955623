"""A tiny sentence-transformers folder built offline: the tiny random BERT of tiny_models.py as its
Transformer module, plus modules.json, 1_Pooling/config.json, an optional Normalize module and
sentence_bert_config.json, as sentence-transformers saves them. Tests and the quick benchmark use it."""

from __future__ import annotations

import json
from pathlib import Path

from repo_builder.export.tiny_models import make_tiny_text_classifier

_MODES = {"mean": "pooling_mode_mean_tokens", "cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens",
          "lasttoken": "pooling_mode_lasttoken"}


def make_tiny_sentence_transformer(
    out_dir: Path, *, pooling: str = "mean", normalize: bool = True, max_seq_length: int = 48, seed: int = 0
) -> Path:
    """Save the folder to ``out_dir`` and return it; ``max_seq_length`` below the model's 128 positions so
    truncation is the checkpoint's, not the model's."""
    make_tiny_text_classifier(out_dir, seed=seed, with_head=False)
    hidden = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))["hidden_size"]
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (out_dir / "modules.json").write_text(json.dumps(modules, indent=2), encoding="utf-8")
    (out_dir / "1_Pooling").mkdir(exist_ok=True)
    config = {"word_embedding_dimension": hidden, **{key: name == pooling for name, key in _MODES.items()}}
    (out_dir / "1_Pooling" / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    (out_dir / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}),
                                                       encoding="utf-8")
    return out_dir
