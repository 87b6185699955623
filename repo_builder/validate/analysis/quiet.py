"""Per model, which rules have nothing to find, from the facts the rules read themselves (the one-pass
summaries, the resolved backend, the versions loaded, the ensemble's stages).

A rule names its flag (``Rule.quiet``); the engine puts the model's flags in the key of its rule plan and
leaves out, without a call, each rule whose flag is true. A true flag is a condition on which its rules
find nothing (they return at once, or every stage they report passed), so the findings are the same either
way; a clean model skips these calls. tests/validate/test_section_gates.py calls each rule past its true
flag and compares the report with calling every rule.
"""

from __future__ import annotations

from typing import NamedTuple

from repo_builder.validate.analysis.devices import devices_fit, group_summary
from repo_builder.validate.analysis.ensemble_graph import members_ok
from repo_builder.validate.analysis.ensemble_tensors import analyze_tensors
from repo_builder.validate.analysis.manifest import manifest
from repo_builder.validate.analysis.onnx_model import check_onnx_model
from repo_builder.validate.analysis.python_step import is_python_step
from repo_builder.validate.analysis.resolve import platform_faults, resolve_backend
from repo_builder.validate.analysis.shapes import io_summary
from repo_builder.validate.analysis.versions import versions_to_load
from repo_builder.validate.records import ModelEntry, RuleContext


class QuietFlags(NamedTuple):
    io_complete: bool  # RB202: every tensor has a name, a named data_type and dims (or no config)
    io_plain_shapes: bool  # RB203: no reshape, every dimension >= 1
    io_plain_features: bool  # RB204: no NHWC/NCHW, shape tensor, non-linear format or TYPE_STRING
    io_unique_names: bool  # RB205: no tensor name twice
    io_no_labels: bool  # RB207: no output names a label file
    no_profiles: bool  # RB307: no instance group lists a TensorRT profile
    ordinary_groups: bool  # RB308: no negative count, no secondary_devices
    plain_listing: bool  # RB103, RB104: a usable folder, no link anywhere in it, only ASCII names
    # RB101, RB102, RB105, RB106, RB107, RB108, RB201, RB301: a visible, usable folder whose config parsed,
    # names the folder (or nothing) and batches >= 0, and whose every subfolder is a version named canonically
    plain_model: bool
    onnx_clean: bool  # RB601-RB607: not an ONNX Runtime model, or one whose graph fits its config
    devices_fit: bool  # RB306: an ensemble, or groups the backend accepts on a target with GPUs (devices_fit)
    platform_clean: bool  # RB401-RB404: ``platform_faults`` finds none
    versions_loaded: bool  # RB110: the version policy loads some version folder
    no_manifest: bool  # RB002: the repository has no readable repo-builder.json
    versions_settled: bool  # RB111: no manifest, and every version folder is one the policy loads
    python_env_unjudged: bool  # RB421, RB422: no image to judge Python steps in, or no Python step
    # RB501-RB511: an ensemble whose own config and members pass, and whose tensors fit its members
    ensemble_clean: bool
    no_python_source: bool  # RB407: the backend resolved is not Python (no model.py to read)


def quiet_flags(model: ModelEntry, ctx: RuleContext) -> QuietFlags:
    """The model's flags (the summaries they come from are kept on the entry for the rules that run)."""
    groups = group_summary(model)
    resolved = resolve_backend(model)
    loaded = versions_to_load(model)
    no_manifest = not isinstance(manifest(ctx), dict)
    return QuietFlags(
        *io_summary(model),
        not groups.profile,
        not groups.odd,
        model.problem is None and model.plain_listing and model.name.isascii(),
        _plain_model(model),
        # the ONNX findings are computed once per model for all seven rules (only for ONNX Runtime models)
        resolved.backend != "onnxruntime" or not check_onnx_model(model, ctx),
        devices_fit(model, ctx),
        not platform_faults(model, ctx),
        bool(loaded),
        no_manifest,
        no_manifest and model.version_numbers == loaded,
        ctx.options.deploy is None or not is_python_step(model, ctx),
        # the ensemble's stages are computed once for all eleven rules (members are judged before it)
        model.is_ensemble and members_ok(model, ctx) and not analyze_tensors(model, ctx),
        resolved.backend != "python",
    )


def _plain_model(model: ModelEntry) -> bool:
    cfg = model.config
    if cfg is None or model.problem is not None or model.name.startswith("."):
        return False  # no config (RB105, RB201 speak), an unusable or hidden folder (RB101, RB102)
    if cfg.max_batch_size < 0 or (cfg.name and cfg.name != model.name):
        return False  # RB301, RB106
    for v in model.versions:  # RB102, RB107, RB108: a folder Triton ignores, or a version named otherwise
        if v.number is None or v.ignored is not None or v.name != str(v.number):
            return False
    return True
