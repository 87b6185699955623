"""The deferred flow: CPU CI writes a compile recipe per TensorRT model, a GPU job builds the plans later.

``defer_plan`` puts into a version folder what the build needs (the ONNX as ``model.source.onnx``, its
external-data files, and ``compile.json``: signature, settings, derived profiles). A version with a
recipe and no plan is *pending*; ``validate`` reports it. ``compile_pending`` builds every pending plan in
place, updates the model's config (``max_batch_size`` from the engine's profile, ``cc_model_filenames``
for per-capability plans) and drops the source ONNX. Everything that can fail without writing (GPU,
TensorRT and its major version, precision for that major, readable recipes whose file names stay inside
their version folder, sources, configs) is checked before the first write, so a refusal leaves the
repository exactly as it was. Validating the result is the caller's job (``cli/compile_pending.py``).
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from repo_builder.compile.plan import (
    BuildEnvironment,
    check_compile_inputs,
    compile_plan,
    require_build_environment,
)
from repo_builder.compile.precision import choose_precision, read_onnx_facts
from repo_builder.compile_recipe import RECIPE_FILE, SOURCE_ONNX, CompileSettings, Recipe, read_recipe
from repo_builder.errors import UserError
from repo_builder.fsutil import (
    move_into_place,
    sha256_file,
    staging_folder,
    write_json_atomic,
    write_text_atomic,
)
from repo_builder.onnx_io import OnnxReadError, read_onnx_signature
from repo_builder.plan_format import (
    DEFAULT_PLAN,
    PER_CAPABILITY_PLAN,
    SIDECAR_FILE,
    engine_max_batch,
    plan_filename,
)
from repo_builder.spec import PlanArtifact, Signature
from repo_builder.tensorrt_releases import same_tensorrt
from repo_builder.triton_config import ConfigParseError, parse_config_text, read_config_file
from repo_builder.triton_layout import CONFIG_FILE

Log = Callable[[str], None]

__all__ = [
    "RECIPE_FILE",
    "SOURCE_ONNX",
    "CompilePendingResult",
    "PendingPlan",
    "Recipe",
    "compile_pending",
    "defer_plan",
    "find_pending",
    "find_recipes",
    "read_recipe",
    "update_config_text",
]


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
    pending: int  # how many plans were found to build


def member_path(version_dir: Path, name: str, recipe_path: Path) -> Path:
    """``version_dir / name`` resolved, refused unless it stays inside the (resolved) version folder.

    Recipe names are checked when read; this also catches a symlink inside the folder that points out.
    """
    root = version_dir.resolve()
    target = (version_dir / name).resolve()
    if target == root or root not in target.parents:
        raise UserError(
            f"{recipe_path}: '{name}' leads outside its version folder; nothing was read or deleted. "
            "Rebuild the recipe with 'repo-builder build --defer-compile'"
        )
    return target


def plans_in(version_dir: Path, recipe_settings: CompileSettings | None = None) -> tuple[str, ...]:
    """Plan files a recipe's version folder already has (model.plan, or model_smXX.plan)."""
    try:
        names = sorted(p.name for p in version_dir.iterdir() if p.is_file())
    except OSError:
        return ()
    if recipe_settings is not None and recipe_settings.per_capability:
        return tuple(n for n in names if PER_CAPABILITY_PLAN.match(n))
    return tuple(n for n in names if n == DEFAULT_PLAN)


def external_data_files(onnx_path: Path) -> tuple[str, ...]:
    """Files an ONNX keeps its weights in (``location`` of external tensors), relative to its folder."""
    try:  # the one ONNX reader: weights never parsed, the file read through the guarded reader
        found = set(read_onnx_signature(onnx_path, onnx_path.parent).external_files)
    except OnnxReadError as exc:
        raise UserError(f"{onnx_path}: not a readable ONNX model ({exc})") from None
    for name in found:
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise UserError(f"{onnx_path}: external data '{name}' is outside the model's folder; re-save it beside the ONNX")
    return tuple(sorted(found))


def defer_plan(onnx_path: Path, signature: Signature, version_dir: Path, settings: CompileSettings) -> Path:
    """Write the ONNX (as ``model.source.onnx``), its external data and ``compile.json`` into ``version_dir``.

    Profiles are derived now, so a signature TensorRT cannot serve fails on the CPU machine, not later.
    Returns the recipe's path.
    """
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


def _edit_text(text: str, max_batch_size: int | None, cc_model_filenames: dict[str, str]) -> str:
    new = text
    if max_batch_size is not None:
        new = re.sub(r"(?m)^(\s*max_batch_size\s*:\s*)\d+", lambda m: f"{m.group(1)}{max_batch_size}", new, count=1)
    for key, value in sorted(cc_model_filenames.items()):
        # mypy cannot infer a lambda whose default binds the loop variable (the default keeps ruff's B023 quiet)
        new = _CC_BLOCK.sub(lambda m, key=key: "" if re.search(rf'key\s*:\s*"{re.escape(key)}"', m.group("body")) else m.group(0), new)  # type: ignore[misc]
        new = new.rstrip("\n") + f'\ncc_model_filenames {{ key: "{key}" value: "{value}" }}\n'
    return new


def update_config_text(text: str, *, max_batch_size: int | None = None, cc_model_filenames: dict[str, str] | None = None) -> str:
    """Edit a config.pbtxt's text in place (comments and layout kept); the result is checked with the proto.

    ``max_batch_size`` replaces a non-zero value (a config that does not batch is left alone);
    ``cc_model_filenames`` entries replace those with the same key and are appended.
    """
    original = parse_config_text(text, CONFIG_FILE)
    batch = max_batch_size if max_batch_size is not None and original.max_batch_size > 0 else None
    wanted = model_config_pb2.ModelConfig()
    wanted.CopyFrom(original)
    if batch is not None:
        wanted.max_batch_size = batch
    for key, value in (cc_model_filenames or {}).items():
        wanted.cc_model_filenames[key] = value
    new = _edit_text(text, batch, cc_model_filenames or {})
    try:
        check = parse_config_text(new, CONFIG_FILE)
    except ConfigParseError:
        return text_format.MessageToString(wanted)  # as below: the edited text does not parse
    if check == wanted:
        return new
    # Unusual layouts (list syntax, one-line configs): fall back to the proto's own text.
    return text_format.MessageToString(wanted)


def _profile_indices(config: model_config_pb2.ModelConfig) -> tuple[int, ...]:
    used = {int(p) for group in config.instance_group for p in group.profile if p.strip().isdigit()}
    return tuple(sorted(used)) or (0,)


# --- compile-pending ----------------------------------------------------------------------------------


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _read_config(config_path: Path) -> tuple[str, model_config_pb2.ModelConfig]:
    if not config_path.is_symlink() and not config_path.exists():
        raise UserError(f"{config_path}: missing; the pending plan's model needs a config")
    read = read_config_file(config_path, config_path.parent)
    if read.config is None or read.text is None:
        raise UserError(f"{config_path}: {read.problem}; fix it before compiling")
    return read.text, read.config


def _settings_for(r: PendingPlan, builder: str | None, timing_cache: Path | None) -> CompileSettings:
    settings = replace(r.recipe.settings, builder=builder or r.recipe.settings.builder, timing_cache=timing_cache)
    return replace(settings, profiles=r.recipe.profiles) if r.recipe.profiles else settings


def _check_expected_tensorrt(envs: dict[str, BuildEnvironment], expected: str | None) -> None:
    for env in envs.values():
        if expected is not None and not same_tensorrt(env.tensorrt_version, expected):
            raise UserError(
                f"this machine builds with TensorRT {env.tensorrt_version} ({env.builder}), but the serving Triton "
                f"ships TensorRT {expected}: its plans would not deserialize there; nothing was built. "
                "Run compile-pending in NVIDIA's TensorRT container of the same release (nvcr.io/nvidia/tensorrt:YY.MM-py3)"
            )


def _precheck(todo: Sequence[PendingPlan], envs: dict[str, BuildEnvironment], builder: str | None, expected: str | None) -> None:
    """Everything a build can refuse, for every recipe, before the first one writes anything."""
    _check_expected_tensorrt(envs, expected)
    for r in todo:
        onnx = member_path(r.version_dir, r.recipe.onnx, r.recipe_path)
        if not onnx.is_file():
            raise UserError(f"{r.recipe_path}: its ONNX '{r.recipe.onnx}' is missing, so the plan cannot be built")
        _read_config(r.version_dir.parent / CONFIG_FILE)
        env = envs[builder or r.recipe.settings.builder]
        try:
            choose_precision(r.recipe.settings.precision, env.tensorrt_major, read_onnx_facts(onnx), flags=r.recipe.settings.precision_flags)
        except UserError as exc:
            raise UserError(f"{r.model}/{r.version}: {exc}; nothing was built") from None


def check_recipe_paths(recipes: Sequence[PendingPlan]) -> None:
    """Every file a recipe names resolves inside its version folder (before the GPU is even asked for)."""
    for r in recipes:
        for name in (r.recipe.onnx, *r.recipe.extra_files):
            member_path(r.version_dir, name, r.recipe_path)


def _todo_and_builders(recipes: list[PendingPlan], builder: str | None, device: int) -> tuple[list[PendingPlan], dict[str, BuildEnvironment]]:
    check_recipe_paths(recipes)
    todo = [r for r in recipes if r.pending]
    per_cap = [r for r in recipes if not r.pending and r.recipe.settings.per_capability]
    if not todo and not per_cap:
        return [], {}
    builders = {builder or r.recipe.settings.builder for r in (*todo, *per_cap)}
    envs = {b: require_build_environment(b, device) for b in sorted(builders)}
    cc = next(iter(envs.values())).gpu.compute_capability
    todo += [r for r in per_cap if plan_filename(cc, True) not in r.plans]
    return todo, envs


def _build_one(r: PendingPlan, settings: CompileSettings, keep_onnx: bool, log: Log, device: int) -> PlanArtifact:
    config_path = r.version_dir.parent / CONFIG_FILE
    onnx = member_path(r.version_dir, r.recipe.onnx, r.recipe_path)
    with staging_folder(r.version_dir, ".compile-staging-") as staging:
        if (r.version_dir / SIDECAR_FILE).exists():
            shutil.copyfile(r.version_dir / SIDECAR_FILE, staging / SIDECAR_FILE)
        log(f"{r.model}/{r.version}: building")
        artifact = compile_plan(onnx, r.recipe.signature, staging, settings, log=log, device=device, final_dir=r.version_dir)
        text, config = _read_config(config_path)
        max_batch = engine_max_batch(artifact.profiles, _profile_indices(config))
        cc_files = {artifact.compute_capability: artifact.plan_path.name} if settings.per_capability else None
        batches = r.recipe.signature.batch_axis is not None and max_batch > 0
        new_text = update_config_text(text, max_batch_size=max_batch if batches else None, cc_model_filenames=cc_files)
        move_into_place(staging, r.version_dir)
    if new_text != text:
        write_text_atomic(config_path, new_text)
    if not keep_onnx and not settings.per_capability:
        for name in (r.recipe.onnx, *r.recipe.extra_files):
            member_path(r.version_dir, name, r.recipe_path)  # checked again: the folder may have changed
            (r.version_dir / name).unlink(missing_ok=True)  # the name itself (a link, not what it points to)
    log(f"{r.model}/{r.version}: wrote {artifact.plan_path.name} (TensorRT {artifact.tensorrt_version}, sm {artifact.compute_capability})")
    return replace(artifact, plan_path=r.version_dir / artifact.plan_path.name, sidecar_path=r.version_dir / SIDECAR_FILE)


def compile_pending(
    repository: Path,
    *,
    builder: str | None = None,
    timing_cache: Path | None = None,
    keep_onnx: bool = False,
    expected_tensorrt: str | None = None,
    log: Log | None = None,
    device: int = 0,
) -> CompilePendingResult:
    """Build every pending plan in place and update configs; refusals come before the first write.

    ``expected_tensorrt``: the TensorRT version of the Triton that will serve the plans (a mismatch with
    this machine's TensorRT is refused before building).
    """
    log = log or _stderr
    todo, envs = _todo_and_builders(find_recipes(Path(repository)), builder, device)
    _precheck(todo, envs, builder, expected_tensorrt)
    if not todo:
        log("no pending TensorRT plans")
    built = [_build_one(r, _settings_for(r, builder, timing_cache), keep_onnx, log, device) for r in todo]
    return CompilePendingResult(tuple(built), len(todo))
