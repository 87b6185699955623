"""A Hugging Face checkpoint folder as the text exporters read it: folder and config checks, model
input selection, tokenizer loading and saving, sequence-length limits, the weights hash, and the shared
trace/parity shapes. The text classifier, token classifier and text embedder all use these as they are.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.fsutil import sha256_file

TOKENIZER_DIR = "tokenizer"
# Graph inputs in this order; a model gets only those its tokenizer emits and its forward() accepts.
KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# int64: what tokenizers return and torch embeddings index with, so the graph needs no Cast; recorded in
# signature.json so Triton configs say TYPE_INT64 (the classic INT32-vs-INT64 mismatch cannot happen).
INPUT_DTYPE = "int64"
HEAD_SEED = 0  # an untrained classification head is initialised from this seed: reproducible exports
TRACE_SHAPE = (2, 16)
PAD_TO_MULTIPLE_OF = 8
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack")


def parity_shapes(max_length: int) -> list[tuple[int, int]]:
    """(batch, sequence): one sequence at the maximum length, a mid batch, the largest batch at an odd length."""
    return [(1, max_length), (4, min(32, max_length)), (8, min(13, max_length))]


def logits_only(torch: Any, model: Any, input_names: list[str]) -> Any:
    """A torch module calling the HF model with keyword inputs in a fixed order, returning its logits."""

    class LogitsOnly(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: Any) -> Any:
            return self.model(**dict(zip(input_names, inputs, strict=True)), return_dict=True).logits

    return LogitsOnly().eval()


def check_model_dir(model_dir: Path) -> Path:
    if not model_dir.exists():
        raise UserError(
            f"--model {model_dir}: no such folder; give a Hugging Face model folder (save_pretrained)"
        )
    if not model_dir.is_dir():
        raise UserError(
            f"--model {model_dir}: is a file; give the Hugging Face model folder that holds config.json"
        )
    if not (model_dir / "config.json").is_file():
        raise UserError(f"--model {model_dir}: no config.json; give a folder written by save_pretrained")
    return model_dir


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' load-report logging and progress bars; what matters goes into the signature."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:300] + "...") if len(text) > 300 else (text or type(exc).__name__)


def load_config(model_dir: Path) -> Any:
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config_file = model_dir / "config.json"
    try:
        raw = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{config_file}: not a readable JSON config ({one_line(exc)})") from None
    model_type = raw.get("model_type") if isinstance(raw, dict) else None
    if not isinstance(model_type, str) or not model_type:
        raise UserError(f"{config_file}: has no 'model_type'; re-save the model with save_pretrained")
    if model_type not in CONFIG_MAPPING:
        raise UserError(
            f"{config_file}: unknown architecture model_type '{model_type}' "
            f"(transformers {transformers.__version__} does not know it)"
        )
    try:
        with quiet_transformers():
            return AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
    except Exception as exc:  # JSON, unknown model_type and I/O errors surface as several types
        raise UserError(
            f"--model {model_dir}: unreadable or unsupported config.json ({one_line(exc)})"
        ) from None


def load_tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    try:
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True, use_fast=True)
    except Exception as exc:
        raise UserError(f"--model {model_dir}: cannot load its tokenizer ({one_line(exc)})") from None
    if not getattr(tokenizer, "is_fast", False) or getattr(tokenizer, "backend_tokenizer", None) is None:
        raise UserError(
            f"--model {model_dir}: has no fast tokenizer (tokenizer.json); the serving step needs one"
        )
    return tokenizer


def select_input_names(model: Any, tokenizer: Any) -> list[str]:
    """The inputs the tokenizer emits and the model's forward() accepts, in KNOWN_INPUTS order."""
    accepted = set(inspect.signature(model.forward).parameters)
    emitted = set(getattr(tokenizer, "model_input_names", ()) or ("input_ids", "attention_mask"))
    names = [name for name in KNOWN_INPUTS if name in accepted and name in emitted]
    if "input_ids" not in names:
        raise UserError(
            f"{type(model).__name__}: takes no input_ids from its tokenizer (model_input_names={sorted(emitted)})"
        )
    return names


def resolve_max_length(config: Any, tokenizer: Any, requested: int | None) -> int:
    limits = [
        int(value)
        for value in (
            getattr(config, "max_position_embeddings", None),
            getattr(tokenizer, "model_max_length", None),
        )
        if isinstance(value, int | float) and 0 < value < 1_000_000  # tokenizers use 1e30 for "no limit"
    ]
    limit = min(limits) if limits else None
    if requested is None:
        if limit is None:
            raise UserError("the model states no maximum sequence length; pass --max-length N")
        return limit
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        raise UserError(f"--max-length {requested!r}: must be a positive integer")
    if limit is not None and requested > limit:
        raise UserError(f"--max-length {requested}: the model handles at most {limit} tokens")
    return requested


def label_names(config: Any) -> list[str]:
    """id2label in index order; a config without names gets LABEL_i, as transformers itself defaults."""
    num_labels = int(getattr(config, "num_labels", 0) or 0)
    id2label = {int(k): str(v) for k, v in (getattr(config, "id2label", None) or {}).items()}
    return [id2label.get(index, f"LABEL_{index}") for index in range(num_labels)]


def save_tokenizer(tokenizer: Any, target: Path) -> None:
    tokenizer.save_pretrained(str(target))
    if not (target / "tokenizer.json").is_file():  # the Python-backend step loads it with `tokenizers`
        tokenizer.backend_tokenizer.save(str(target / "tokenizer.json"))


def folder_weights_sha256(model_dir: Path) -> str:
    """One hash over config.json and every weights file (name and content), in name order."""
    digest = hashlib.sha256()
    files = sorted(
        p
        for p in model_dir.iterdir()
        if p.is_file() and (p.name == "config.json" or p.suffix in WEIGHT_SUFFIXES)
    )
    for path in files:
        digest.update(f"{path.name} {sha256_file(path)}\n".encode())
    return digest.hexdigest()
