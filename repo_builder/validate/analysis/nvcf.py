"""Facts about NVIDIA Cloud Functions assets: which models read NVCF headers, and which headers a target
server forwards (``repo_builder.nvcf`` holds the names; this module only reads configs)."""

from __future__ import annotations

from repo_builder.nvcf import (
    ASSET_DIR_HEADER,
    FORWARD_PATTERN,
    HEADERS,
    PARAM_INPUT,
    PARAM_ROOT,
    forwards_headers,
)
from repo_builder.validate.records import ModelEntry

__all__ = ["ASSET_DIR_HEADER", "FORWARD_PATTERN", "HEADERS", "asset_input", "unforwarded_headers"]


def asset_input(model: ModelEntry) -> str | None:
    """The input a ``--nvcf-assets`` step takes asset ids in (its config's parameters say so), or None."""
    config = model.config
    if config is None or PARAM_ROOT not in config.parameters:
        return None
    return config.parameters[PARAM_INPUT].string_value if PARAM_INPUT in config.parameters else "?"


def unforwarded_headers(pattern: str | None) -> tuple[str, ...]:
    """The NVCF asset headers a server run with ``--http-header-forward-pattern pattern`` would not forward
    (the pattern was checked when the options were made)."""
    return forwards_headers(pattern)
