"""The explicit rule registry: every rule module lists its rules in ``RULES``; this joins them in order.

Ensemble rules run last (the engine judges members before the ensembles that use them). Repository-level
rules (``repository.py``) run once per repository, before the models.
"""

from __future__ import annotations

from repo_builder.validate.records import Rule
from repo_builder.validate.rules import (
    batching,
    config,
    dali,
    ensemble_types,
    ensemble_wiring,
    instances,
    io,
    layout,
    model_files,
    nvcf,
    onnx_io,
    platform,
    repository,
    sequence,
    tensorrt,
    versions,
    warmup,
)

MODULES = (
    repository,
    layout,
    versions,
    config,
    io,
    warmup,
    batching,
    sequence,
    instances,
    platform,
    model_files,
    dali,
    onnx_io,
    tensorrt,
    nvcf,
    ensemble_wiring,
    ensemble_types,
)

RULES: tuple[Rule, ...] = tuple(r for module in MODULES for r in module.RULES)
