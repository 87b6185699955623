"""Per model, which rules have nothing to find, from the one-pass summaries the rules read themselves.

A rule names its flag (``Rule.quiet``); the engine puts the model's flags in the key of its rule plan and
leaves out, without a call, each rule whose flag is true. Every flag is the exact condition on which its
rule returns at once, so the findings are the same either way; a clean model skips these calls.
"""

from __future__ import annotations

from typing import NamedTuple

from repo_builder.validate.analysis.devices import group_summary
from repo_builder.validate.analysis.onnx_model import check_onnx_model
from repo_builder.validate.analysis.resolve import resolve_backend
from repo_builder.validate.analysis.shapes import io_summary
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


def quiet_flags(model: ModelEntry, ctx: RuleContext) -> QuietFlags:
    """The model's flags (the summaries they come from are kept on the entry for the rules that run)."""
    groups = group_summary(model)
    return QuietFlags(
        *io_summary(model),
        not groups.profile,
        not groups.odd,
        model.problem is None and model.plain_listing and model.name.isascii(),
        _plain_model(model),
        # the ONNX findings are computed once per model for all seven rules (only for ONNX Runtime models)
        resolve_backend(model).backend != "onnxruntime" or not check_onnx_model(model, ctx),
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
