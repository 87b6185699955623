"""Rules RB5xx (continued): the tensors an ensemble passes between its members (stage three).

Core's ``ValidateEnsembleConfig`` (``ensemble_utils.cc``), judged only when the ensemble's own config
and its members pass (ensemble_wiring.py); the graph walk is analysis/ensemble_tensors.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from repo_builder.validate.analysis.ensemble_tensors import analyze_tensors
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, rule


def _stage(model: ModelEntry, ctx: RuleContext, stage: str) -> Iterator[Finding]:
    for item in analyze_tensors(model, ctx):
        if item.stage == stage:
            yield item.finding


@rule("RB508", "ensemble-max-batch-size", ensemble_only=True, field="max_batch_size", quiet="ensemble_clean")
def check_max_batch_size(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """An ensemble batches no more than any batching member allows.

    Triton: "ensemble E allows maximum batch size N, but it contains model M which only allows maximum
    batch size to be K". Non-batching members (`max_batch_size: 0`) are allowed in a batching ensemble
    when their shapes include the batch dimension.

    Fails: ensemble `max_batch_size: 8`, member `max_batch_size: 4`. Passes: ensemble `max_batch_size: 4`.
    """
    yield from _stage(model, ctx, "batch")


@rule("RB509", "ensemble-tensor-mapping", ensemble_only=True, field="input_map", quiet="ensemble_clean")
def check_tensor_mapping(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Each step's `input_map` keys are inputs of the member, its `output_map` keys outputs of the member,
    and every required member input is fed.

    Triton: "in ensemble E, ensemble tensor T is mapping to non-existing input X in model M", "... is
    mapped from non-existing output Y in model M", "in ensemble E, input X in model M is not mapped to
    any ensemble tensors" (inputs marked `optional: true` may stay unmapped). When a member's inputs
    and outputs are filled in from its model file (auto-complete: ONNX Runtime, TensorRT, a Python
    model.py with `auto_complete_config`), the check needs the model file. A member without
    config.pbtxt whose backend fills in nothing (a model.py without `auto_complete_config`) has no
    inputs or outputs at all, so every mapping to it fails. The finding points at the step's map entry
    (its `key:` line), or at the step's `input_map` for an input left unmapped.

    Fails: `input_map { key: "INPUT" value: "data" }` for a member whose input is `INPUT0`.
    Passes: `key: "INPUT0"`.
    """
    yield from _stage(model, ctx, "mapping")


@rule("RB510", "ensemble-tensor-consistency", ensemble_only=True, field="ensemble_scheduling", quiet="ensemble_clean")
def check_tensor_consistency(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A tensor passed between steps has one data type and one shape everywhere it appears.

    Triton: "in ensemble E, ensemble tensor T: inconsistent data type: TYPE_A is inferred from model M1
    while TYPE_B is inferred from model M2", "... inconsistent shape: [..] is inferred from model M1
    while [..] is inferred from model M2". Shapes match when equal with -1 as a wildcard, also after
    adding the batch dimension: a batching member's `[16]` matches a non-batching member's `[-1,16]`.
    The finding points at the `dims` (or `data_type`) that differ: the ensemble's own input or output
    when it is one side, else the member's; the message ends with the other side's file and line.

    Fails: a member writes TYPE_FP32 into a tensor another member reads as TYPE_INT32. Passes: both FP32.
    """
    yield from _stage(model, ctx, "consistency")


@rule("RB511", "ensemble-decoupled-branches", ensemble_only=True, field="ensemble_scheduling", quiet="ensemble_clean")
def check_decoupled_branches(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A step may not combine tensors that descend from different decoupled members.

    A decoupled member sends any number of responses per request, so Triton cannot pair tensors from two
    such branches: "in ensemble E, step of model 'M' receives inputs originated from different decoupled
    models" (M is the ensemble itself when two branches meet only at its outputs).

    Fails: two decoupled steps whose outputs feed one later step. Passes: one decoupled branch.
    """
    yield from _stage(model, ctx, "decoupled")


RULES: tuple[Rule, ...] = (
    check_max_batch_size,
    check_tensor_mapping,
    check_tensor_consistency,
    check_decoupled_branches,
)
