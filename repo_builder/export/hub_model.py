"""``--model`` as a Hugging Face Hub id: the local cache first, a download when the network allows.

A folder on disk always wins over a Hub id of the same spelling. The cache is the one transformers and
huggingface_hub use (``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``), read at
call time; ``HF_HUB_OFFLINE=1`` never touches the network.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from repo_builder.errors import ToolError, UserError, require

# org/name or name: what the Hub accepts as a model id (huggingface_hub validates it again).
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")
# What a sequence classifier needs: config, weights, tokenizer (no other frameworks' weights).
_WANTED = ("*.json", "*.safetensors", "*.txt", "*.model", "tokenizer*", "vocab*", "merges*", "pytorch_model*.bin")


def hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "huggingface")
    return Path(home) / "hub"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def looks_like_hub_id(value: str) -> bool:
    return bool(_HUB_ID.match(value)) and ".." not in value and not value.endswith((".pt", ".bin", ".onnx"))


def resolve_model(value: str | Path, option: str = "--model") -> Path:
    """A local folder as given; else, for a Hub id, its snapshot folder in the cache (downloaded first
    when it is not cached and the network is allowed). Anything else is returned as given, for the
    caller's own "no such folder" message."""
    path = Path(value)
    text = str(value)
    if path.exists() or not looks_like_hub_id(text):
        return path
    hub = require("huggingface_hub", "export", "reading a Hugging Face Hub model")
    cache = hub_cache()
    try:
        return Path(hub.snapshot_download(text, cache_dir=str(cache), local_files_only=True))
    except Exception as exc:  # not cached (LocalEntryNotFoundError), or an id the Hub would refuse
        if type(exc).__name__ == "HFValidationError":
            raise UserError(f"{option} {text}: neither a folder nor a valid Hugging Face model id") from None
    if _offline():
        raise UserError(
            f"{option} {text}: no such folder, and not in the Hugging Face cache {cache} (HF_HUB_OFFLINE is set); "
            "pass a model folder, or download it where the network allows"
        )
    try:
        return Path(hub.snapshot_download(text, cache_dir=str(cache), allow_patterns=list(_WANTED)))
    except Exception as exc:  # the Hub's own errors: not found, gated, no network
        if type(exc).__name__ in ("RepositoryNotFoundError", "GatedRepoError", "RevisionNotFoundError"):
            raise UserError(f"{option} {text}: no such folder, and the Hub has no model you can read by that id") from None
        raise ToolError(
            f"{option} {text}: no such folder, not in the Hugging Face cache {cache}, and the download failed "
            f"({type(exc).__name__}); pass a model folder, or set HF_HOME to a cache that holds it"
        ) from None
