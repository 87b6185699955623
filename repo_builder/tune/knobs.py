"""What ``tune`` may change in each step of an ensemble, and how a setting becomes a config.

A step's knobs: its instance count; for a model step that reads ``intra_op_thread_count`` (the Python
ONNX Runtime step repo-builder renders, or Triton's ONNX Runtime backend) its threads per instance; for a
step with dynamic batching, how long the batcher waits for a fuller batch. Nothing else in a config is
touched: names, types, shapes and versions stay as they are, so every setting serves the same API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig

THREADS_KEY = "intra_op_thread_count"
QUEUE_DELAYS_US = (0, 100, 500, 2000)  # the batcher's wait: none, the builds' default, more, much more


@dataclass(frozen=True)
class StepKnobs:
    """One step's setting. ``threads``/``queue_delay_us`` None: the step has no such knob."""

    instances: int
    threads: int | None = None
    queue_delay_us: int | None = None

    def describe(self) -> str:
        parts = [f"{self.instances} inst"]
        if self.threads is not None:
            parts.append(f"{self.threads} thr")
        if self.queue_delay_us is not None:
            parts.append(f"{self.queue_delay_us} us")
        return " ".join(parts)


# A whole candidate: step (model) name -> its knobs; sorted tuples so candidates compare and hash.
Setting = tuple[tuple[str, StepKnobs], ...]


def setting_of(knobs: Mapping[str, StepKnobs]) -> Setting:
    return tuple(sorted(knobs.items()))


def flat_knobs(setting: Setting) -> dict[str, int]:
    """``{"text_classifier_model.instances": 2, ...}``: the search record's ``knobs``."""
    out: dict[str, int] = {}
    for name, k in setting:
        out[f"{name}.instances"] = k.instances
        if k.threads is not None:
            out[f"{name}.intra_op_threads"] = k.threads
        if k.queue_delay_us is not None:
            out[f"{name}.max_queue_delay_us"] = k.queue_delay_us
    return out


def _parameter(config: ModelConfig, key: str) -> str | None:
    return config.parameters[key].string_value if key in config.parameters else None


def current_knobs(config: ModelConfig) -> StepKnobs:
    """The knobs as the config sets them now (the search starts here: the build's own choice)."""
    count = sum(max(1, g.count) for g in config.instance_group) if len(config.instance_group) else 1
    threads_text = _parameter(config, THREADS_KEY)
    threads = int(threads_text) if threads_text is not None and threads_text.strip().isdigit() else None
    delay = int(config.dynamic_batching.max_queue_delay_microseconds) if config.HasField("dynamic_batching") else None
    return StepKnobs(instances=count, threads=threads, queue_delay_us=delay)


def apply_knobs(config: ModelConfig, knobs: StepKnobs) -> ModelConfig:
    """A copy of ``config`` with ``knobs`` set. One instance group keeps everything but its count (so the
    write-back edits one value); several become one of the first group's kind (KIND_CPU by default)."""
    new = type(config)()
    new.CopyFrom(config)
    if len(new.instance_group) == 1:
        if max(1, new.instance_group[0].count) != knobs.instances:  # an unset count (0) is one instance already
            new.instance_group[0].count = knobs.instances
    else:
        kind = new.instance_group[0].kind if len(new.instance_group) else None
        del new.instance_group[:]
        group = new.instance_group.add()
        group.count = knobs.instances
        if kind is not None:
            group.kind = kind
    if knobs.threads is not None:
        new.parameters[THREADS_KEY].string_value = str(knobs.threads)
    if knobs.queue_delay_us is not None and new.HasField("dynamic_batching"):
        new.dynamic_batching.max_queue_delay_microseconds = knobs.queue_delay_us
    return new


@dataclass(frozen=True)
class StepSpace:
    """The values one step's knobs may take."""

    name: str
    instances: tuple[int, ...]
    threads: tuple[int, ...] = ()  # empty: no thread knob
    queue_delays_us: tuple[int, ...] = ()  # empty: no batching knob


def step_space(config: ModelConfig, cores: int, max_instances: int) -> StepSpace:
    """Instances 1..max_instances; threads 1..cores when the step reads them; every queue delay when it
    batches dynamically. Instances x threads beyond the cores only oversubscribe them, so those are left out
    by ``neighbours``."""
    threads = tuple(range(1, cores + 1)) if _parameter(config, THREADS_KEY) is not None else ()
    delays = QUEUE_DELAYS_US if config.HasField("dynamic_batching") else ()
    return StepSpace(config.name, tuple(range(1, max_instances + 1)), threads, delays)


def _nearest(values: tuple[int, ...], current: int, step: int) -> int | None:
    """The value next to ``current`` in ``values`` (up for step 1, down for -1)."""
    ordered = sorted(values)
    if current not in ordered:
        return ordered[0] if ordered else None
    index = ordered.index(current) + step
    return ordered[index] if 0 <= index < len(ordered) else None


def neighbours(knobs: StepKnobs, space: StepSpace, cores: int) -> list[StepKnobs]:
    """Settings one move away: one instance more or less (threads following cores // instances), one
    thread more or less, the next shorter or longer batching delay."""
    out: list[StepKnobs] = []
    for step in (1, -1):
        count = _nearest(space.instances, knobs.instances, step)
        if count is not None:
            threads = max(1, cores // count) if knobs.threads is not None else None
            out.append(StepKnobs(count, threads, knobs.queue_delay_us))
        if knobs.threads is not None and space.threads:
            threads = _nearest(space.threads, knobs.threads, step)
            if threads is not None and threads * knobs.instances <= cores:
                out.append(StepKnobs(knobs.instances, threads, knobs.queue_delay_us))
        if knobs.queue_delay_us is not None and space.queue_delays_us:
            delay = _nearest(space.queue_delays_us, knobs.queue_delay_us, step)
            if delay is not None:
                out.append(StepKnobs(knobs.instances, knobs.threads, delay))
    return [k for k in dict.fromkeys(out) if k != knobs]
