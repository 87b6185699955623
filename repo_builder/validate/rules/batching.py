"""Rules RB3xx: batching and the dynamic batcher (core's ValidateModelConfig).

Sequence batching is in sequence.py, instance groups in instances.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from repo_builder.validate.analysis.autocomplete import io_autocompleted
from repo_builder.validate.analysis.positions import PathStep, placed
from repo_builder.validate.analysis.resolve import config_name
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelQueuePolicy

DELAY = 1  # ModelQueuePolicy.TimeoutAction.DELAY


@rule("RB301", "max-batch-size", field="max_batch_size", quiet="plain_model")
def check_max_batch_size(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """`max_batch_size` is 0 (no batching: the first dimension is part of `dims`) or positive.

    Triton: "'max_batch_size' must be non-negative value for M".

    Fails: `max_batch_size: -2`. Passes: `max_batch_size: 8`.
    """
    cfg = model.config
    if cfg is not None and cfg.max_batch_size < 0:
        yield Finding(f"'max_batch_size' must be non-negative value for {config_name(model)}")


@rule("RB302", "dynamic-batching-sizes", field="dynamic_batching", sections=("dynamic_batching",))
def check_dynamic_batching_sizes(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Dynamic batching's `preferred_batch_size` values are positive and at most `max_batch_size`.

    Triton: "dynamic batching preferred size must be positive for M", "dynamic batching preferred size
    must be <= max batch size for M". With `max_batch_size: 0` every preferred size fails; Triton
    checks this before any backend auto-complete, so a backend cannot rescue it. Dynamic batching with
    no queue settings on a model that does not batch does nothing (warning).

    Fails: `max_batch_size: 4` with `dynamic_batching { preferred_batch_size: [ 8 ] }`.
    Passes: `preferred_batch_size: [ 2, 4 ]`.
    """
    cfg = model.config
    if cfg is None or not cfg.HasField("dynamic_batching"):
        return
    name = config_name(model)
    text = model.config_text
    db = cfg.dynamic_batching
    sizes = db.preferred_batch_size[:]  # a list: cheaper to walk than the repeated field
    for index, size in enumerate(sizes):
        at = ("dynamic_batching", "preferred_batch_size", index)
        if size <= 0:
            yield placed(Finding(f"dynamic batching preferred size must be positive for {name}"), text, *at)
        elif size > cfg.max_batch_size:
            found = Finding(
                f"dynamic batching preferred size must be <= max batch size for {name}",
                hint=f"preferred size {size} > max_batch_size {cfg.max_batch_size}",
            )
            yield placed(found, text, *at)
    # Queue settings are a reason to keep the block on a non-batching model; and a backend's
    # auto-complete may still raise max_batch_size from the model file.
    if (
        cfg.max_batch_size == 0
        and not sizes
        and not (db.priority_levels or db.HasField("default_queue_policy") or db.priority_queue_policy)
        and not io_autocompleted(model, ctx)
    ):
        yield Finding(
            f"dynamic_batching on {name} forms no batches because max_batch_size is 0",
            severity=Severity.WARNING,
            hint="set max_batch_size > 0 (and drop the batch dimension from dims) to batch requests",
        )


@rule("RB303", "dynamic-batching-queues", field="dynamic_batching", sections=("dynamic_batching",))
def check_dynamic_batching_queues(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Priority levels and queue policies of dynamic batching are consistent.

    Triton: "default priority level must be in range [1, N] for M", "priority queue policy must have
    priority level in range [1, N] for M", and with `preserve_ordering: true`: "Only one priority level
    is allowed when 'preserve_ordering' is true for M", "Queue policy can not have DELAY as timeout
    action when 'preserve_ordering' is true for M".

    Fails: `dynamic_batching { priority_levels: 3 }` (no default level). Passes: add
    `default_priority_level: 2`.
    """
    cfg = model.config
    if cfg is None or not cfg.HasField("dynamic_batching"):
        return
    db = cfg.dynamic_batching
    levels = db.priority_levels
    if levels == 0 and not db.preserve_ordering:
        return  # the common block: nothing below applies
    name = config_name(model)
    text = model.config_text
    if levels != 0:
        if db.default_priority_level == 0 or db.default_priority_level > levels:
            found = Finding(f"default priority level must be in range [1, {levels}] for {name}")
            yield placed(found, text, "dynamic_batching", "default_priority_level")
        for level in db.priority_queue_policy:
            if level == 0 or level > levels:
                found = Finding(f"priority queue policy must have priority level in range [1, {levels}] for {name}")
                yield placed(found, text, "dynamic_batching", "priority_queue_policy", ("key", str(level)), "key")
    if db.preserve_ordering:
        if levels > 1:
            found = Finding(f"Only one priority level is allowed when 'preserve_ordering' is true for {name}")
            yield placed(found, text, "dynamic_batching", "priority_levels")
        policies: list[tuple[tuple[PathStep, ...], ModelQueuePolicy]] = [(("default_queue_policy",), db.default_queue_policy)]
        policies += [(("priority_queue_policy", ("key", str(k)), "value"), p) for k, p in db.priority_queue_policy.items()]
        delayed = [at for at, p in policies if p.default_timeout_microseconds != 0 and p.timeout_action == DELAY]
        if delayed:
            found = Finding(
                f"Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for {name}"
            )
            yield placed(found, text, "dynamic_batching", *delayed[0], "timeout_action")


@rule("RB309", "response-cache-decoupled", field="response_cache", sections=("response_cache",))
def check_response_cache(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """The response cache cannot serve decoupled models.

    Triton: "Response Cache does not currently support model M with 'decoupled' transaction policy.
    Please disable the response cache." (Sequence batching has its own message, RB304.)

    Fails: `model_transaction_policy { decoupled: true } response_cache { enable: true }`.
    Passes: drop `response_cache`.
    """
    cfg = model.config
    if cfg is not None and cfg.model_transaction_policy.decoupled and cfg.response_cache.enable:
        yield Finding(
            f"Response Cache does not currently support model {config_name(model)} with 'decoupled' transaction "
            "policy. Please disable the response cache."
        )


RULES: tuple[Rule, ...] = (
    check_max_batch_size,
    check_dynamic_batching_sizes,
    check_dynamic_batching_queues,
    check_response_cache,
)
