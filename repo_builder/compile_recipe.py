"""The compile recipe format: what a TensorRT build is asked to do (``CompileSettings``) and the
``compile.json`` a deferred build leaves in a version folder (``Recipe``).

Light on purpose (no TensorRT, ONNX or compile flow): ``validate`` reads recipes to report pending plans,
and ``compile``/``compile-pending`` build from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from repo_builder import __version__
from repo_builder.errors import UserError
from repo_builder.fsutil import read_json_format
from repo_builder.spec import DEFAULT_MAX_BATCH_SIZE, Profile, Signature

RECIPE_FILE = "compile.json"
RECIPE_FORMAT = 1
SOURCE_ONNX = "model.source.onnx"

PRECISIONS = ("fp32", "fp16", "bf16", "int8")
BUILDERS = ("auto", "api", "trtexec")


@dataclass(frozen=True)
class CompileSettings:
    """Build settings. ``profiles`` are overrides (possibly naming only some inputs); the rest is derived."""

    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    max_seq_len: int | None = None
    precision: str = "fp16"
    builder: str = "auto"
    profiles: tuple[Profile, ...] = ()
    timing_cache: Path | None = None
    opt_level: int | None = None
    workspace_mib: int | None = None
    per_capability: bool = False
    # TensorRT 10's builder flags on an fp32 graph instead of precision in the graph (compile/precision.py).
    precision_flags: bool = False

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
        "precision_flags": settings.precision_flags,
    }


def settings_from_json(data: dict[str, Any]) -> CompileSettings:
    cache = data.get("timing_cache")
    return CompileSettings(
        max_batch_size=int(data.get("max_batch_size", DEFAULT_MAX_BATCH_SIZE)),
        max_seq_len=data.get("max_seq_len"),
        precision=data.get("precision", "fp16"),
        builder=data.get("builder", "auto"),
        profiles=tuple(profile_from_json(p) for p in data.get("profiles", [])),
        timing_cache=Path(cache) if cache else None,
        opt_level=data.get("opt_level"),
        workspace_mib=data.get("workspace_mib"),
        per_capability=bool(data.get("per_capability", False)),
        # Recipes written before precision moved into the graph built with TensorRT 10's flags.
        precision_flags=bool(data.get("precision_flags", "precision_flags" not in data)),
    )


def check_member_name(name: str, recipe_path: Path) -> str:
    """A file name a recipe gives (its ONNX, external data) must stay inside its version folder.

    compile-pending reads and deletes these names, so "../../victim" or an absolute path is refused here,
    before anything happens; the caller also resolves the path (symlinks) before touching it.
    """
    pure = PurePosixPath(name)
    if not name or "\\" in name or pure.is_absolute() or any(part in ("", ".", "..") for part in name.split("/")):
        raise UserError(
            f"{recipe_path}: names '{name}', which is not a file inside its version folder; "
            "rebuild the recipe with 'repo-builder build --defer-compile'"
        )
    return name


@dataclass(frozen=True)
class Recipe:
    """What ``compile.json`` holds."""

    onnx: str
    signature: Signature
    settings: CompileSettings
    profiles: tuple[Profile, ...]
    onnx_sha256: str = ""
    extra_files: tuple[str, ...] = ()  # external-data files the ONNX refers to

    def to_json(self) -> dict[str, Any]:
        return {
            "format": RECIPE_FORMAT,
            "kind": "tensorrt_plan",
            "onnx": self.onnx,
            "onnx_sha256": self.onnx_sha256,
            "extra_files": list(self.extra_files),
            "signature": self.signature.to_json(),
            "settings": settings_to_json(self.settings),
            "profiles": [profile_to_json(p) for p in self.profiles],
            "written_by": f"repo-builder {__version__}",
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Recipe:
        return cls(
            onnx=str(data["onnx"]),
            signature=Signature.from_json(data["signature"]),
            settings=settings_from_json(data["settings"]),
            profiles=tuple(profile_from_json(p) for p in data.get("profiles", [])),
            onnx_sha256=str(data.get("onnx_sha256", "")),
            extra_files=tuple(str(n) for n in data.get("extra_files", [])),
        )


def read_recipe(path: Path) -> Recipe:
    """A version folder's ``compile.json``, with every file name it gives checked; else a one-line UserError."""
    try:
        recipe = Recipe.from_json(read_json_format(path, RECIPE_FORMAT))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UserError) as exc:
        raise UserError(f"{path}: not a valid compile recipe ({exc}); rebuild with 'repo-builder build --defer-compile'") from None
    for name in (recipe.onnx, *recipe.extra_files):
        check_member_name(name, path)
    return recipe
