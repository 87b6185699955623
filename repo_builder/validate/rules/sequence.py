"""Rules RB3xx (continued): sequence batching, its control tensors and its implicit state (core's
``GetBooleanSequenceControlProperties``/``GetTypedSequenceControlProperties`` and the state set-up)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from repo_builder.validate.analysis.devices import KIND_GPU
from repo_builder.validate.analysis.enums import enum_name
from repo_builder.validate.analysis.positions import placed
from repo_builder.validate.analysis.resolve import config_name
from repo_builder.validate.analysis.shapes import WILDCARD
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, VersionDir, rule

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelSequenceBatching

CONTROL_START, CONTROL_END, CONTROL_READY, CONTROL_CORRID = 0, 1, 2, 3
BOOLEAN_CONTROLS = (CONTROL_START, CONTROL_END, CONTROL_READY)
CORRID_TYPES = frozenset({4, 5, 8, 9, 13})  # TYPE_UINT32, TYPE_UINT64, TYPE_INT32, TYPE_INT64, TYPE_STRING


def _kind_name(kind: int) -> str:
    from tritonclient.grpc import model_config_pb2 as pb

    return enum_name(pb.ModelSequenceBatching.Control.Kind, kind)


def _control_problems(cfg: ModelConfig, name: str) -> Iterator[str]:
    """Core's Get{Boolean,Typed}SequenceControlProperties for every control kind."""
    controls = cfg.sequence_batching.control_input
    for kind in (*BOOLEAN_CONTROLS, CONTROL_CORRID):
        seen_tensors: set[str] = set()
        seen_kind = False
        for ci in controls:
            if not ci.name:
                yield f"sequence batching control tensor must have a name for {name}"
                return
            if ci.name in seen_tensors:
                yield f"sequence batching control tensor '{ci.name}' is specified for multiple control kinds for {name}"
                return
            seen_tensors.add(ci.name)
            for c in ci.control:
                if c.kind != kind:
                    continue
                if seen_kind:
                    yield f"sequence batching specifies multiple {_kind_name(kind)} tensors for {name}"
                    return
                seen_kind = True
                problem = _control_value_problem(c, kind, name)
                if problem:
                    yield problem


def _control_value_problem(c: ModelSequenceBatching.Control, kind: int, name: str) -> str | None:
    """What is wrong with one control's values (core's Get{Boolean,Typed}SequenceControlProperties)."""
    given = [n for n in ("int32_false_true", "fp32_false_true", "bool_false_true") if len(getattr(c, n))]
    if kind == CONTROL_CORRID:
        if given:
            return (
                "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or "
                f"'bool_false_true' for {_kind_name(kind)} for {name}"
            )
        if c.data_type not in CORRID_TYPES:
            return (
                f"unexpected data type for control CONTROL_SEQUENCE_CORRID for {name}. Allowed data "
                "types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING"
            )
        return None
    if not given:
        return (
            "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or "
            f"'bool_false_true' for {_kind_name(kind)} for {name}"
        )
    if len(given) > 1:
        return (
            "sequence batching specifies more than one from 'int32_false_true', 'fp32_false_true' "
            f"and 'bool_false_true' for {_kind_name(kind)} for {name}"
        )
    if len(getattr(c, given[0])) != 2:
        return f"sequence batching control '{given[0]}' must have exactly 2 entries for {_kind_name(kind)} for {name}"
    return None


@rule("RB304", "sequence-batching-controls", field="sequence_batching", sections=("sequence_batching",))
def check_sequence_controls(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Sequence batching's control tensors and strategy settings are well formed.

    Each control tensor has a name and one control kind; each of START, END, READY appears at most once
    and gives exactly one of `int32_false_true`, `fp32_false_true`, `bool_false_true` with 2 entries;
    CORRID gives none of those and a data type among UINT64, INT64, UINT32, INT32, STRING; `oldest`
    preferred batch sizes are positive and <= `max_batch_size`; `direct` minimum slot utilization lies
    in [0, 1]; the response cache cannot be used with sequence batching. Messages are Triton's, e.g.
    "sequence batching specifies multiple CONTROL_SEQUENCE_END tensors for M".

    Fails: a READY control with no `int32_false_true`. Passes: `int32_false_true: [ 0, 1 ]`.
    """
    cfg = model.config
    if cfg is None or not cfg.HasField("sequence_batching"):
        return
    name = config_name(model)
    text = model.config_text
    if cfg.response_cache.enable:
        found = Finding(
            f"Response Cache does not currently support model {name} with sequence batching scheduler. "
            "Please disable the response cache."
        )
        yield placed(found, text, "response_cache")
    for problem in _control_problems(cfg, name):
        yield placed(Finding(problem), text, "sequence_batching", "control_input")
    sb = cfg.sequence_batching
    if sb.HasField("oldest"):
        for index, size in enumerate(sb.oldest.preferred_batch_size):
            at = ("sequence_batching", "oldest", "preferred_batch_size", index)
            if size <= 0:
                yield placed(Finding(f"sequence batching preferred batch size must be positive for {name}"), text, *at)
            elif size > cfg.max_batch_size:
                yield placed(
                    Finding(f"sequence batching preferred batch size must be <= max batch size for {name}"), text, *at
                )
    if sb.HasField("direct") and not 0.0 <= sb.direct.minimum_slot_utilization <= 1.0:
        found = Finding(f"sequence batching minimum slot utilization must be in range (0.0, 1.0] for {name}")
        yield placed(found, text, "sequence_batching", "direct", "minimum_slot_utilization")


@rule("RB305", "sequence-batching-state", field="sequence_batching", sections=("sequence_batching",))
def check_sequence_state(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Implicit sequence state (`sequence_batching.state`) and its `initial_state` are consistent.

    Triton's sequence batcher refuses: more than one `initial_state` ("must contain exactly one or zero
    element"), an initial state whose data type differs from the state's, with no `name`, with a
    different number of dims, with a -1 dim or a dim the state fixes differently, a state input named
    twice, `use_growable_memory` without `use_same_buffer_for_input_output` or on non-GPU instances.
    A `data_file` must exist in the model's `initial_state/` folder.

    Fails: `initial_state { data_type: TYPE_INT32 dims: [ -1 ] zero_data: true name: "s" }`.
    Passes: `dims: [ 1 ]`.
    """
    cfg = model.config
    if cfg is None or not cfg.HasField("sequence_batching"):
        return
    seen: set[str] = set()
    folder = next((v for v in model.versions if v.name == "initial_state"), None)
    gpu_only = bool(cfg.instance_group) and all(g.kind == KIND_GPU for g in cfg.instance_group)
    text = model.config_text
    for state in cfg.sequence_batching.state:
        sname = state.input_name
        # Each finding at the state entry it is about (its input_name), not the sequence_batching block.
        at = ("sequence_batching", "state", ("input_name", sname))
        if state.use_growable_memory:
            if not state.use_same_buffer_for_input_output:
                found = Finding(
                    "In order to 'use_growable_memory', you must also enable 'use_single_buffer' for state input "
                    f"name '{sname}'."
                )
                yield placed(found, text, *at, "use_growable_memory")
            elif not gpu_only:
                found = Finding(
                    "'use_growable_memory' can only work with KIND_GPU model instances right now. Please either "
                    f"change the instance type to KIND_GPU or set 'use_growable_memory' to false for state input '{sname}'."
                )
                yield placed(found, text, *at, "use_growable_memory")
        if len(state.initial_state) > 1:
            found = Finding(
                f"initial_state field for state input '{sname}' must contain exactly one or zero element. "
                f"Found '{len(state.initial_state)}' elements."
            )
            yield placed(found, text, *at, "initial_state", 1)
            continue
        if not state.initial_state:
            continue
        problem = _initial_state_problem(state, seen)
        if problem is not None:
            yield placed(Finding(problem), text, *at, "initial_state")
            continue
        for found in _initial_state_data(model, state, folder):
            # The missing data file is reported on that file; the rest on the initial_state entry.
            yield found if found.path is not None else placed(found, text, *at, "initial_state")


def _initial_state_problem(state: ModelSequenceBatching.State, seen: set[str]) -> str | None:
    """Core's checks of one ``initial_state`` against its state, in core's order (the first one wins)."""
    sname, init = state.input_name, state.initial_state[0]
    if init.data_type != state.data_type:
        return f"The data type used for 'initial_state' field of state '{sname}' does not match the state data type."
    if not init.name:
        return f"Field 'name' must be set when using initial_state for state input '{sname}'."
    if sname in seen:
        return f"State input name '{sname}' specified more than once."
    seen.add(sname)
    if len(init.dims) != len(state.dims):
        return (
            "Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state "
            f"input '{sname}'. {len(init.dims)} != {len(state.dims)}"
        )
    return None


def _initial_state_data(model: ModelEntry, state: ModelSequenceBatching.State, folder: VersionDir | None) -> Iterator[Finding]:
    sname, init = state.input_name, state.initial_state[0]
    for got, want in zip(init.dims, state.dims, strict=True):
        if got == WILDCARD:
            yield Finding(f"'initial_state' field for state input name '{sname}' contains variable dimensions.")
            break
        if want != WILDCARD and got != want:
            yield Finding(
                f"'initial_state' dim for input name '{sname}' doesn't match 'state' dim description. {got} != {want}"
            )
            break
    which = init.WhichOneof("state_data")
    if which is None:
        yield Finding(f"initial_state setting expects state'{sname}' to have state_data set")
    elif which == "data_file" and (folder is None or folder.entry(init.data_file) is None):
        yield Finding(
            f"initial state file '{init.data_file}' for state '{sname}' does not exist in {model.name}/initial_state/",
            path=model.path / "initial_state" / init.data_file,
        )


RULES: tuple[Rule, ...] = (
    check_sequence_controls,
    check_sequence_state,
)
