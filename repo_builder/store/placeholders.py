"""Object stores drop empty folders, and Triton needs every version folder it loads (an ensemble's ``1/``
holds no file of its own): a published version folder that would be empty gets a placeholder object."""

from __future__ import annotations

import hashlib

from repo_builder.triton_layout import PLACEHOLDER_FILE

PLACEHOLDER_TEXT = b"Keeps this version folder in object stores, which drop empty folders (repo-builder publish).\n"
PLACEHOLDER_SHA256 = hashlib.sha256(PLACEHOLDER_TEXT).hexdigest()


def placeholder_key(folder: str) -> str:
    """The placeholder's key in ``folder`` (relative, '/'-separated)."""
    return f"{folder}/{PLACEHOLDER_FILE}"
