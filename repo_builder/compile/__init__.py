"""ONNX -> TensorRT plan: profiles from the signature, the TensorRT API or trtexec, ``plan.json`` sidecars,
and the deferred flow (``defer_plan`` on CPU, ``compile_pending`` on a GPU job).

Nothing here imports TensorRT at module level. ``repo-builder validate`` does not import this package: what
it needs about plans and recipes lives in the light modules ``repo_builder.plan_format``,
``repo_builder.compile_recipe`` and ``repo_builder.tensorrt_releases``.
"""

from __future__ import annotations

from repo_builder.compile.pending import (
    CompilePendingResult,
    PendingPlan,
    compile_pending,
    defer_plan,
    find_pending,
    find_recipes,
    update_config_text,
)
from repo_builder.compile.plan import compile_plan
from repo_builder.compile.profiles import derive_profiles, parse_profile_options
from repo_builder.compile_recipe import RECIPE_FILE, SOURCE_ONNX, CompileSettings, Recipe, read_recipe
from repo_builder.plan_format import (
    DEFAULT_PLAN,
    SIDECAR_FILE,
    EngineTensor,
    PlanInfo,
    engine_max_batch,
    plan_filename,
    read_sidecar,
    write_sidecar,
)
from repo_builder.spec import PlanArtifact, Profile, ShapeRange

__all__ = [
    "DEFAULT_PLAN",
    "RECIPE_FILE",
    "SIDECAR_FILE",
    "SOURCE_ONNX",
    "CompilePendingResult",
    "CompileSettings",
    "EngineTensor",
    "PendingPlan",
    "PlanArtifact",
    "PlanInfo",
    "Profile",
    "Recipe",
    "ShapeRange",
    "compile_pending",
    "compile_plan",
    "defer_plan",
    "derive_profiles",
    "engine_max_batch",
    "find_pending",
    "find_recipes",
    "parse_profile_options",
    "plan_filename",
    "read_recipe",
    "read_sidecar",
    "update_config_text",
    "write_sidecar",
]
