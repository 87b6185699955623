"""NVIDIA Cloud Functions (NVCF) assets: the names and limits shared by build, validate, serve and bench.

NVCF copies the assets of a request into ``<root>/<request id>`` and tells the container where through two
HTTP headers; tritonserver hands them to the ensemble's first step as request parameters only when it runs
with ``--http-header-forward-pattern`` matching them (DESIGN.md §7, measured on 2.51). A repository built
with ``--nvcf-assets`` records its settings as string ``parameters`` of its preprocessing step's config,
which is where the generated model.py reads them and where validate recognises such a step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from repo_builder.errors import UserError

ASSET_DIR_HEADER = "NVCF-ASSET-DIR"
ASSET_IDS_HEADER = "NVCF-FUNCTION-ASSET-IDS"
HEADERS = (ASSET_DIR_HEADER, ASSET_IDS_HEADER)
FORWARD_PATTERN = "NVCF-.*"  # what `serve --nvcf` passes, and what NVCF's Triton containers run with
DEFAULT_ROOT = "/var/inf/inputAssets"  # where NVCF puts each request's asset folder
DEFAULT_MAX_ASSET_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_ASSETS = 64
MAX_ID_LENGTH = 255  # an id is a file name: NAME_MAX on Linux file systems
ASSET_SUFFIX = "_ASSET"  # IMAGE -> IMAGE_ASSET

# The preprocessing step's config parameters (string values).
PARAM_INPUT = "nvcf_asset_input"
PARAM_ROOT = "nvcf_asset_root"
PARAM_MAX_BYTES = "nvcf_max_asset_bytes"
PARAM_MAX_ASSETS = "nvcf_max_assets"


def asset_input_name(image_input: str) -> str:
    return image_input + ASSET_SUFFIX


@dataclass(frozen=True)
class NvcfAssets:
    """``build --nvcf-assets``: inputs may come from NVCF assets under ``root`` (fixed at build time)."""

    root: str = DEFAULT_ROOT
    max_asset_bytes: int = DEFAULT_MAX_ASSET_BYTES
    max_assets: int = DEFAULT_MAX_ASSETS

    def __post_init__(self) -> None:
        root = self.root
        if not isinstance(root, str) or not root.startswith("/") or "\x00" in root or len(root) > 1024:
            raise UserError(f"--asset-root {root!r}: give an absolute folder path (NVCF's is {DEFAULT_ROOT})")
        if ".." in root.split("/") or root.rstrip("/") == "":
            raise UserError(f"--asset-root {root!r}: no '..' and not '/' itself; give the folder NVCF copies assets into")
        if isinstance(self.max_asset_bytes, bool) or not 1 <= self.max_asset_bytes <= 2**40:
            raise UserError(f"--max-asset-bytes must be between 1 and 2**40, got {self.max_asset_bytes}")
        if isinstance(self.max_assets, bool) or not 1 <= self.max_assets <= 4096:
            raise UserError(f"--max-assets must be between 1 and 4096, got {self.max_assets}")

    @property
    def normalized_root(self) -> str:
        return "/" + "/".join(part for part in self.root.split("/") if part not in ("", "."))

    def parameters(self, image_input: str) -> dict[str, str]:
        """The preprocessing step's config ``parameters`` (read by its model.py at load)."""
        return {
            PARAM_INPUT: asset_input_name(image_input),
            PARAM_ROOT: self.normalized_root,
            PARAM_MAX_BYTES: str(self.max_asset_bytes),
            PARAM_MAX_ASSETS: str(self.max_assets),
        }


def forwards_headers(pattern: str | None) -> tuple[str, ...]:
    """The NVCF asset headers a tritonserver started with ``--http-header-forward-pattern pattern`` does
    NOT forward (all of them when no pattern). Triton matches header names with RE2 partial matching and
    without regard to case; Python's ``re`` agrees with RE2 on the patterns people write for this."""
    if not pattern:
        return HEADERS
    compiled = re.compile(check_forward_pattern(pattern) or "", re.IGNORECASE)
    return tuple(h for h in HEADERS if not compiled.search(h))


def check_forward_pattern(pattern: str | None, option: str = "--http-header-forward-pattern") -> str | None:
    """A pattern Python can compile (one line, no NUL); None stays None."""
    if pattern is None:
        return None
    if not pattern or "\x00" in pattern or "\n" in pattern or len(pattern) > 1024:
        raise UserError(f"{option} {pattern!r}: give a regular expression of header names, e.g. '{FORWARD_PATTERN}'")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UserError(f"{option} {pattern!r}: not a regular expression ({exc}); e.g. '{FORWARD_PATTERN}'") from None
    return pattern
