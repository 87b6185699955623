"""The explicit rule registry: every rule module lists its rules in ``RULES``; this joins them in order.

Ensemble rules run last (the engine judges members before the ensembles that use them).
"""

from __future__ import annotations

from repo_builder.validate.records import Rule
from repo_builder.validate.rules import batching, config, ensemble, layout, onnx_io, platform, tensorrt

MODULES = (layout, config, batching, platform, onnx_io, tensorrt, ensemble)

RULES: tuple[Rule, ...] = tuple(r for module in MODULES for r in module.RULES)
