"""The explicit rule registry: every rule module lists its rules in ``RULES``; this joins them in order.

Ensemble rules run last (the engine judges members before the ensembles that use them). Repository-level
rules (``repository.py``) run once per repository, before the models.
"""

from __future__ import annotations

from collections.abc import Callable

from repo_builder.validate.records import ModelEntry, Rule, RuleContext
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
    python_env,
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
    python_env,
    onnx_io,
    tensorrt,
    nvcf,
    ensemble_wiring,
    ensemble_types,
)

RULES: tuple[Rule, ...] = tuple(r for module in MODULES for r in module.RULES)

Gate = Callable[[ModelEntry, RuleContext], bool]
# Rule families that find nothing for a model of another backend (each module's ``applies`` says when they
# can): the engine asks the gate once per model and skips the family's rules when it says no. About a
# fifth of the ~55 calls per model; the findings are the same, since every gated rule checks the same
# condition first.
GATES: dict[Rule, Gate] = {r: module.applies for module in (onnx_io, tensorrt, dali) for r in module.GATED}
