"""What a TensorRT build is asked to do: one frozen value shared by compile, defer and compile-pending."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.spec import Profile

PRECISIONS = ("fp32", "fp16", "bf16", "int8")
BUILDERS = ("auto", "api", "trtexec")


@dataclass(frozen=True)
class CompileSettings:
    """Build settings. ``profiles`` are overrides (possibly naming only some inputs); the rest is derived."""

    max_batch_size: int = 8
    max_seq_len: int | None = None
    precision: str = "fp16"
    builder: str = "auto"
    profiles: tuple[Profile, ...] = ()
    timing_cache: Path | None = None
    opt_level: int | None = None
    workspace_mib: int | None = None
    per_capability: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "profiles", tuple(self.profiles))
        if self.max_batch_size < 0:
            raise UserError(f"--max-batch-size must be >= 0 (0: the model does not batch), got {self.max_batch_size}")
        if self.max_seq_len is not None and self.max_seq_len < 1:
            raise UserError(f"--max-seq-len must be >= 1, got {self.max_seq_len}")
        if self.precision not in PRECISIONS:
            raise UserError(f"--precision must be one of {', '.join(PRECISIONS)}, got '{self.precision}'")
        if self.builder not in BUILDERS:
            raise UserError(f"--builder must be one of {', '.join(BUILDERS)}, got '{self.builder}'")
        if self.opt_level is not None and not 0 <= self.opt_level <= 5:
            raise UserError(f"--opt-level must be between 0 and 5 (TensorRT's builder optimization level), got {self.opt_level}")
        if self.workspace_mib is not None and self.workspace_mib < 1:
            raise UserError(f"--workspace must be >= 1 MiB, got {self.workspace_mib}")


def profile_to_json(profile: Profile) -> dict[str, dict[str, list[int]]]:
    return {name: {"min": list(r.min), "opt": list(r.opt), "max": list(r.max)} for name, r in profile.shapes}


def profile_from_json(data: dict[str, Any]) -> Profile:
    profile = Profile()
    for name, r in data.items():
        profile = profile.add(name, tuple(r["min"]), tuple(r["opt"]), tuple(r["max"]))
    return profile


def settings_to_json(settings: CompileSettings) -> dict[str, Any]:
    """The recipe form; the timing cache path is machine-specific, so compile-pending may override it."""
    return {
        "max_batch_size": settings.max_batch_size,
        "max_seq_len": settings.max_seq_len,
        "precision": settings.precision,
        "builder": settings.builder,
        "profiles": [profile_to_json(p) for p in settings.profiles],
        "timing_cache": str(settings.timing_cache) if settings.timing_cache else None,
        "opt_level": settings.opt_level,
        "workspace_mib": settings.workspace_mib,
        "per_capability": settings.per_capability,
    }


def settings_from_json(data: dict[str, Any]) -> CompileSettings:
    cache = data.get("timing_cache")
    return CompileSettings(
        max_batch_size=int(data.get("max_batch_size", 8)),
        max_seq_len=data.get("max_seq_len"),
        precision=data.get("precision", "fp16"),
        builder=data.get("builder", "auto"),
        profiles=tuple(profile_from_json(p) for p in data.get("profiles", [])),
        timing_cache=Path(cache) if cache else None,
        opt_level=data.get("opt_level"),
        workspace_mib=data.get("workspace_mib"),
        per_capability=bool(data.get("per_capability", False)),
    )
