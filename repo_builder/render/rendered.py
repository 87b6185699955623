"""What rendering produces for one model of a pipeline, before anything touches the disk."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROLES = ("preprocess", "model", "postprocess", "ensemble")


@dataclass(frozen=True)
class RenderedModel:
    """One model folder's content: its ``config.pbtxt`` (already parsed back with Triton's proto) and the
    files of its version folder, as relative path -> bytes (generated) or Path (a file to copy/move)."""

    name: str
    role: str
    version: int
    config_text: str
    files: Mapping[str, bytes | Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown role {self.role!r}; expected one of {', '.join(ROLES)}")
        if self.version < 0:
            raise ValueError(f"version must be >= 0, got {self.version}")
        for rel in self.files:
            parts = Path(rel).parts
            if not parts or Path(rel).is_absolute() or ".." in parts:
                raise ValueError(f"file '{rel}' of model '{self.name}' must be a relative path inside its version folder")
