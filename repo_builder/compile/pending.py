"""The deferred flow: CPU CI writes a compile recipe per TensorRT model, a GPU job builds the plans later.

``defer_plan`` puts into a version folder what the build needs (the ONNX as ``model.source.onnx``, its
external-data files, and ``compile.json``: signature, settings, derived profiles). A version with a
recipe and no plan is *pending*; ``validate`` reports it. ``compile_pending`` builds every pending plan in
place, updates the model's config (``max_batch_size`` from the engine's profile, ``cc_model_filenames``
for per-capability plans), drops the source ONNX, and validates. Everything that can fail without writing
(GPU, TensorRT, readable recipes and sources) is checked before the first write, so a machine without a
GPU leaves the repository exactly as it was.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder import __version__
from repo_builder.compile.profiles import engine_max_batch
from repo_builder.compile.settings import (
    CompileSettings,
    profile_from_json,
    profile_to_json,
    settings_from_json,
    settings_to_json,
)
from repo_builder.compile.sidecar import SIDECAR_FILE
from repo_builder.errors import UserError
from repo_builder.fsutil import (
    move_into_place,
    read_json_format,
    sha256_file,
    staging_folder,
    write_json_atomic,
    write_text_atomic,
)
from repo_builder.spec import PlanArtifact, Profile, Signature

if TYPE_CHECKING:
    from repo_builder.validate.report import Report

RECIPE_FILE = "compile.json"
RECIPE_FORMAT = 1
SOURCE_ONNX = "model.source.onnx"
CONFIG_FILE = "config.pbtxt"
_PER_CAPABILITY_PLAN = re.compile(r"^model_sm\d{2,3}\.plan$")
Log = Callable[[str], None]


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
            extra_files=tuple(data.get("extra_files", [])),
        )


@dataclass(frozen=True)
class PendingPlan:
    """A version folder with a recipe; ``plans`` are the plan files it already has."""

    model: str
    version: str
    version_dir: Path
    recipe_path: Path
    recipe: Recipe
    plans: tuple[str, ...] = ()

    @property
    def pending(self) -> bool:
        return not self.plans


@dataclass(frozen=True)
class CompilePendingResult:
    built: tuple[PlanArtifact, ...]
    report: Report | None


def read_recipe(path: Path) -> Recipe:
    try:
        return Recipe.from_json(read_json_format(path, RECIPE_FORMAT))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UserError) as exc:
        raise UserError(f"{path}: not a valid compile recipe ({exc}); rebuild with 'repo-builder build --defer-compile'") from None


def plans_in(version_dir: Path, recipe_settings: CompileSettings | None = None) -> tuple[str, ...]:
    """Plan files a recipe's version folder already has (model.plan, or model_smXX.plan)."""
    try:
        names = sorted(p.name for p in version_dir.iterdir() if p.is_file())
    except OSError:
        return ()
    if recipe_settings is not None and recipe_settings.per_capability:
        return tuple(n for n in names if _PER_CAPABILITY_PLAN.match(n))
    return tuple(n for n in names if n == "model.plan")


def external_data_files(onnx_path: Path) -> tuple[str, ...]:
    """Files an ONNX keeps its weights in (``location`` of external tensors), relative to its folder."""
    import onnx

    try:
        model = onnx.load(str(onnx_path), load_external_data=False)
    except Exception as exc:
        raise UserError(f"{onnx_path}: not a readable ONNX model ({exc})") from None
    found: set[str] = set()
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location":
                    found.add(entry.value)
    for name in found:
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise UserError(f"{onnx_path}: external data '{name}' is outside the model's folder; re-save it beside the ONNX")
    return tuple(sorted(found))


def defer_plan(onnx_path: Path, signature: Signature, version_dir: Path, settings: CompileSettings) -> Path:
    """Write the ONNX (as ``model.source.onnx``), its external data and ``compile.json`` into ``version_dir``.

    Profiles are derived now, so a signature TensorRT cannot serve fails on the CPU machine, not later.
    Returns the recipe's path.
    """
    from repo_builder.compile.plan import check_compile_inputs

    onnx_path = Path(onnx_path)
    version_dir = Path(version_dir)
    profiles = check_compile_inputs(onnx_path, signature, settings)
    extra = external_data_files(onnx_path)
    for name in extra:
        if not (onnx_path.parent / name).is_file():
            raise UserError(f"{onnx_path}: its external data file '{name}' is missing")
    version_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(onnx_path, version_dir / SOURCE_ONNX)
    for name in extra:
        (version_dir / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(onnx_path.parent / name, version_dir / name)
    # The timing cache path belongs to the build machine; compile-pending is given its own.
    recipe = Recipe(SOURCE_ONNX, signature, replace(settings, timing_cache=None), profiles, sha256_file(onnx_path), extra)
    path = version_dir / RECIPE_FILE
    write_json_atomic(path, recipe.to_json())
    return path


def find_recipes(repository: Path) -> list[PendingPlan]:
    """Every version folder holding a ``compile.json``, built or not (model folder / version folder order)."""
    repository = Path(repository)
    if not repository.is_dir():
        raise UserError(f"{repository}: no such folder; pass the model repository's path")
    found = []
    for model_dir in sorted(p for p in repository.iterdir() if p.is_dir()):
        for version_dir in sorted(p for p in model_dir.iterdir() if p.is_dir()):
            recipe_path = version_dir / RECIPE_FILE
            if recipe_path.is_file():
                recipe = read_recipe(recipe_path)
                found.append(
                    PendingPlan(model_dir.name, version_dir.name, version_dir, recipe_path, recipe, plans_in(version_dir, recipe.settings))
                )
    return found


def find_pending(repository: Path) -> list[PendingPlan]:
    """Version folders with a recipe and no plan yet."""
    return [p for p in find_recipes(repository) if p.pending]


# --- config updates -----------------------------------------------------------------------------------

_CC_BLOCK = re.compile(r"cc_model_filenames\s*:?\s*\{(?P<body>[^{}]*)\}\s*,?", re.MULTILINE)


def update_config_text(text: str, *, max_batch_size: int | None = None, cc_model_filenames: dict[str, str] | None = None) -> str:
    """Edit a config.pbtxt's text in place (comments and layout kept); the result is checked with the proto.

    ``max_batch_size`` replaces a non-zero value (a config that does not batch is left alone);
    ``cc_model_filenames`` entries replace those with the same key and are appended.
    """
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    original = model_config_pb2.ModelConfig()
    text_format.Parse(text, original)
    new = text
    if max_batch_size is not None and original.max_batch_size > 0:
        new = re.sub(r"(?m)^(\s*max_batch_size\s*:\s*)\d+", lambda m: f"{m.group(1)}{max_batch_size}", new, count=1)
    for key, value in sorted((cc_model_filenames or {}).items()):
        new = _CC_BLOCK.sub(lambda m, key=key: "" if re.search(rf'key\s*:\s*"{re.escape(key)}"', m.group("body")) else m.group(0), new)
        new = new.rstrip("\n") + f'\ncc_model_filenames {{ key: "{key}" value: "{value}" }}\n'
    check = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(new, check)
        ok = True
    except text_format.ParseError:
        ok = False
    wanted = model_config_pb2.ModelConfig()
    wanted.CopyFrom(original)
    if max_batch_size is not None and original.max_batch_size > 0:
        wanted.max_batch_size = max_batch_size
    for key, value in (cc_model_filenames or {}).items():
        wanted.cc_model_filenames[key] = value
    if ok and check == wanted:
        return new
    # Unusual layouts (list syntax, one-line configs): fall back to the proto's own text.
    return text_format.MessageToString(wanted)


def _profile_indices(config: Any) -> tuple[int, ...]:
    used = set()
    for group in config.instance_group:
        for p in group.profile:
            if p.strip().isdigit():
                used.add(int(p))
    return tuple(sorted(used)) or (0,)


# --- compile-pending ----------------------------------------------------------------------------------


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def compile_pending(
    repository: Path,
    *,
    builder: str | None = None,
    timing_cache: Path | None = None,
    keep_onnx: bool = False,
    triton_release: str | None = None,
    validate: bool = True,
    log: Log | None = None,
    device: int = 0,
) -> CompilePendingResult:
    """Build every pending plan in place, update configs, then validate the repository."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    from repo_builder.compile.plan import compile_plan, plan_filename, require_build_environment

    log = log or _stderr
    repository = Path(repository)
    recipes = find_recipes(repository)
    todo: list[PendingPlan] = [r for r in recipes if r.pending]
    per_cap = [r for r in recipes if not r.pending and r.recipe.settings.per_capability]
    if todo or per_cap:
        # Everything that can fail without writing is checked first: the repository stays as it was.
        builders = {builder or r.recipe.settings.builder for r in (*todo, *per_cap)}
        envs = {b: require_build_environment(b, device) for b in sorted(builders)}
        cc = next(iter(envs.values())).gpu.compute_capability
        todo += [r for r in per_cap if plan_filename(cc, True) not in r.plans]
        for r in todo:
            if not (r.version_dir / r.recipe.onnx).is_file():
                raise UserError(f"{r.recipe_path}: its ONNX '{r.recipe.onnx}' is missing, so the plan cannot be built")
            config_path = r.version_dir.parent / CONFIG_FILE
            try:
                text_format.Parse(config_path.read_text(encoding="utf-8"), model_config_pb2.ModelConfig())
            except FileNotFoundError:
                raise UserError(f"{config_path}: missing; the pending plan's model needs a config") from None
            except (OSError, UnicodeDecodeError, text_format.ParseError) as exc:
                raise UserError(f"{config_path}: cannot be read or parsed ({exc}); fix it before compiling") from None
    if not todo:
        log("no pending TensorRT plans")
    built = []
    for r in todo:
        settings = replace(r.recipe.settings, builder=builder or r.recipe.settings.builder, timing_cache=timing_cache)
        if r.recipe.profiles:
            settings = replace(settings, profiles=r.recipe.profiles)
        model_dir = r.version_dir.parent
        with staging_folder(r.version_dir, ".compile-staging-") as staging:
            if (r.version_dir / SIDECAR_FILE).exists():
                shutil.copyfile(r.version_dir / SIDECAR_FILE, staging / SIDECAR_FILE)
            log(f"{r.model}/{r.version}: building")
            artifact = compile_plan(
                r.version_dir / r.recipe.onnx, r.recipe.signature, staging, settings, log=log, device=device, final_dir=r.version_dir
            )
            config_path = model_dir / CONFIG_FILE
            text = config_path.read_text(encoding="utf-8")
            config = model_config_pb2.ModelConfig()
            text_format.Parse(text, config)
            max_batch = engine_max_batch(artifact.profiles, _profile_indices(config))
            cc_files = {artifact.compute_capability: artifact.plan_path.name} if settings.per_capability else None
            batches = r.recipe.signature.batch_axis is not None and max_batch > 0
            new_text = update_config_text(text, max_batch_size=max_batch if batches else None, cc_model_filenames=cc_files)
            move_into_place(staging, r.version_dir)
            if new_text != text:
                write_text_atomic(config_path, new_text)
            if not keep_onnx and not settings.per_capability:
                for name in (r.recipe.onnx, *r.recipe.extra_files):
                    (r.version_dir / name).unlink(missing_ok=True)
            built.append(replace(artifact, plan_path=r.version_dir / artifact.plan_path.name, sidecar_path=r.version_dir / SIDECAR_FILE))
            log(f"{r.model}/{r.version}: wrote {artifact.plan_path.name} (TensorRT {artifact.tensorrt_version}, sm {artifact.compute_capability})")
    report = None
    if validate:
        from repo_builder.compile.gpu import gpu_present
        from repo_builder.validate.engine import validate_repository
        from repo_builder.validate.records import ValidateOptions

        report = validate_repository(repository, ValidateOptions(triton_release=triton_release, gpu_present=gpu_present()))
    return CompilePendingResult(tuple(built), report)
