"""ONNX -> TensorRT plan: profiles from the signature, the TensorRT API or trtexec, ``plan.json`` sidecars,
and the deferred flow (``defer_plan`` on CPU, ``compile_pending`` on a GPU job).

Nothing here imports TensorRT at module level; ``repo-builder validate`` may import this package freely.
"""

from __future__ import annotations

from repo_builder.compile.plan import DEFAULT_PLAN, compile_plan, plan_filename
from repo_builder.compile.pending import (
    RECIPE_FILE,
    SOURCE_ONNX,
    CompilePendingResult,
    PendingPlan,
    Recipe,
    compile_pending,
    defer_plan,
    find_pending,
    find_recipes,
    read_recipe,
    update_config_text,
)
from repo_builder.compile.profiles import derive_profiles, engine_max_batch, parse_profile_options
from repo_builder.compile.settings import CompileSettings
from repo_builder.compile.sidecar import SIDECAR_FILE, EngineTensor, PlanInfo, read_sidecar, write_sidecar
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
