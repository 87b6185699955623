"""Per model, which rules have nothing to find, from the one-pass summaries the rules read themselves.

A rule names its flag (``Rule.quiet``); the engine puts the model's flags in the key of its rule plan and
leaves out, without a call, each rule whose flag is true. Every flag is the exact condition on which its
rule returns at once, so the findings are the same either way; a clean model skips these calls.
"""

from __future__ import annotations

from typing import NamedTuple

from repo_builder.validate.analysis.devices import group_summary
from repo_builder.validate.analysis.shapes import io_summary
from repo_builder.validate.records import ModelEntry


class QuietFlags(NamedTuple):
    io_complete: bool  # RB202: every tensor has a name, a named data_type and dims (or no config)
    io_plain_shapes: bool  # RB203: no reshape, every dimension >= 1
    io_plain_features: bool  # RB204: no NHWC/NCHW, shape tensor, non-linear format or TYPE_STRING
    io_unique_names: bool  # RB205: no tensor name twice
    io_no_labels: bool  # RB207: no output names a label file
    no_profiles: bool  # RB307: no instance group lists a TensorRT profile
    ordinary_groups: bool  # RB308: no negative count, no secondary_devices
    plain_listing: bool  # RB103, RB104: a usable folder, no link anywhere in it, only ASCII names


def quiet_flags(model: ModelEntry) -> QuietFlags:
    """The model's flags (the summaries they come from are kept on the entry for the rules that run)."""
    groups = group_summary(model)
    return QuietFlags(
        *io_summary(model),
        not groups.profile,
        not groups.odd,
        model.problem is None and model.plain_listing and model.name.isascii(),
    )
