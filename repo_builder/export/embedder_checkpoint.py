"""What a text-embedding checkpoint says about itself: a sentence-transformers folder's own modules
(``modules.json``, ``1_Pooling/config.json``, a Normalize module, ``sentence_bert_config.json``), or the
pooling and normalization given for a plain Hugging Face encoder. Pure file reading: no torch here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError

POOLINGS = ("mean", "cls", "max", "lasttoken")
OUTPUT_DTYPES = ("fp32", "fp16")
# sentence-transformers' legacy boolean keys of 1_Pooling/config.json -> its mode names.
LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
TRANSFORMER_TYPES = ("sentence_transformers.models.Transformer", "sentence_transformers.base.modules.transformer.Transformer")


@dataclass(frozen=True)
class EmbedderCheckpoint:
    """How the checkpoint turns token vectors into one vector per text."""

    encoder_dir: Path  # the Hugging Face encoder folder (config.json, weights, tokenizer)
    pooling: str  # one of POOLINGS
    normalize: bool  # L2-normalize the pooled vector
    max_length: int | None  # truncation length (sentence_bert_config.json max_seq_length), None: the model's
    origin: str  # "sentence-transformers" (the folder's own modules) or "options" (--pooling/--normalize)
    dimension: int | None = None  # the pooling config's word_embedding_dimension, when stated


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{path}: not readable JSON ({' '.join(str(exc).split())[:200]})") from None


def _module_type(entry: Any, path: Path) -> tuple[str, str]:
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        raise UserError(f"{path}: every module needs a 'type'; re-save the model with sentence-transformers")
    return entry["type"], str(entry.get("path", ""))


def _pooling_mode(config: Any, path: Path) -> str:
    if not isinstance(config, dict):
        raise UserError(f"{path}: expected a JSON object")
    mode = config.get("pooling_mode")
    modes = [mode] if isinstance(mode, str) else list(mode) if isinstance(mode, list) else []
    if not modes:
        modes = [name for key, name in LEGACY_POOLING_KEYS.items() if config.get(key)]
    if len(modes) != 1:
        raise UserError(f"{path}: pooling modes {modes or 'none'}; one of {', '.join(POOLINGS)} is supported")
    if modes[0] not in POOLINGS:
        raise UserError(f"{path}: pooling '{modes[0]}' is not supported; one of {', '.join(POOLINGS)} is")
    return str(modes[0])


def _sentence_transformers(folder: Path) -> EmbedderCheckpoint:
    modules_file = folder / "modules.json"
    modules = _read_json(modules_file)
    if not isinstance(modules, list) or not modules:
        raise UserError(f"{modules_file}: expected a list of modules")
    kinds = [_module_type(m, modules_file) for m in modules]
    names = [kind.rsplit(".", 1)[-1] for kind, _ in kinds]
    unsupported = [kind for kind, name in zip((k for k, _ in kinds), names, strict=True) if name not in ("Transformer", "Pooling", "Normalize")]
    if unsupported:
        raise UserError(f"{modules_file}: module {unsupported[0]} is not supported (Transformer, Pooling and Normalize are)")
    if names[:2] != ["Transformer", "Pooling"] or names[2:] not in ([], ["Normalize"]):
        raise UserError(f"{modules_file}: expected Transformer, Pooling and optionally Normalize, in that order; found {', '.join(names)}")
    encoder = folder / kinds[0][1]
    pooling_file = folder / kinds[1][1] / "config.json"
    pooling_config = _read_json(pooling_file)
    pooling = _pooling_mode(pooling_config, pooling_file)
    bert_config = encoder / "sentence_bert_config.json"
    max_length = None
    if bert_config.is_file():
        settings = _read_json(bert_config)
        if isinstance(settings, dict) and settings.get("do_lower_case"):
            raise UserError(f"{bert_config}: do_lower_case is not supported (lowercasing outside the tokenizer)")
        value = settings.get("max_seq_length") if isinstance(settings, dict) else None
        max_length = int(value) if isinstance(value, int) and value > 0 else None
    prompts = folder / "config_sentence_transformers.json"
    if prompts.is_file():
        data = _read_json(prompts)
        if isinstance(data, dict) and data.get("default_prompt_name"):
            raise UserError(f"{prompts}: a default prompt ({data['default_prompt_name']!r}) is not supported; serve texts with their prompt")
    dimension = pooling_config.get("word_embedding_dimension")
    return EmbedderCheckpoint(encoder, pooling, names[-1] == "Normalize", max_length, "sentence-transformers",
                              int(dimension) if isinstance(dimension, int) else None)


def read_embedder_checkpoint(
    folder: Path, *, pooling: str | None = None, normalize: bool | None = None, output_option: str = "--model"
) -> EmbedderCheckpoint:
    """The checkpoint's pooling: its own modules when it is a sentence-transformers folder (``pooling`` and
    ``normalize`` given must then agree with them), else ``pooling`` (required) and ``normalize``."""
    if not folder.is_dir():
        raise UserError(f"{output_option} {folder}: no such folder; pass a sentence-transformers or Hugging Face model folder")
    if pooling is not None and pooling not in POOLINGS:
        raise UserError(f"--pooling {pooling}: choose one of {', '.join(POOLINGS)}")
    if not (folder / "modules.json").is_file():
        if pooling is None:
            raise UserError(f"{output_option} {folder}: no modules.json (not a sentence-transformers folder); "
                            f"pass --pooling {'|'.join(POOLINGS)} (and --normalize if the vectors should be unit length)")
        return EmbedderCheckpoint(folder, pooling, bool(normalize), None, "options")
    found = _sentence_transformers(folder)
    if pooling is not None and pooling != found.pooling:
        raise UserError(f"--pooling {pooling}: {folder} pools with '{found.pooling}' (1_Pooling/config.json); drop --pooling")
    if normalize and not found.normalize:
        raise UserError(f"--normalize: {folder} has no Normalize module (modules.json); drop --normalize")
    return found
