"""RB3xx: max_batch_size, dynamic and sequence batching, instance groups, response cache; one breaking
and one passing repository per rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.rule_repo_helpers import IO, found, python_model, validate

from repo_builder.validate.records import Severity


def _messages(root: Path, code: str, **options: object) -> list[str]:
    return [d.message for d in found(validate(root, **options), code)]


def test_max_batch_size_fails_when_negative(tmp_path: Path) -> None:
    python_model(tmp_path, "m", max_batch_size=-2)
    assert _messages(tmp_path, "RB301") == ["'max_batch_size' must be non-negative value for m"]


def test_max_batch_size_passes_when_zero_or_positive(tmp_path: Path) -> None:
    python_model(tmp_path, "a", max_batch_size=0)
    python_model(tmp_path, "b", max_batch_size=8)
    assert _messages(tmp_path, "RB301") == []


@pytest.mark.parametrize(
    ("max_batch_size", "sizes", "message"),
    [
        (4, "[ 2, 8 ]", "dynamic batching preferred size must be <= max batch size for m"),
        (0, "[ 1 ]", "dynamic batching preferred size must be <= max batch size for m"),
        (4, "[ 0 ]", "dynamic batching preferred size must be positive for m"),
    ],
)
def test_dynamic_batching_sizes_fail_when_preferred_size_is_out_of_range(
    tmp_path: Path, max_batch_size: int, sizes: str, message: str
) -> None:
    python_model(
        tmp_path, "m", IO + f"dynamic_batching {{ preferred_batch_size: {sizes} }}\n", max_batch_size
    )
    assert _messages(tmp_path, "RB302") == [message]


def test_dynamic_batching_sizes_warn_when_model_does_not_batch(tmp_path: Path) -> None:
    python_model(tmp_path, "m", IO + "dynamic_batching { }\n", max_batch_size=0)
    [d] = found(validate(tmp_path), "RB302")
    assert d.severity == Severity.WARNING


def test_dynamic_batching_sizes_pass_when_non_batching_model_uses_priority_queues(tmp_path: Path) -> None:
    python_model(tmp_path, "m", IO + "dynamic_batching { priority_levels: 2 default_priority_level: 1 }\n")
    assert _messages(tmp_path, "RB302") == []


def test_dynamic_batching_sizes_pass_when_within_max_batch_size(tmp_path: Path) -> None:
    python_model(
        tmp_path, "m", IO + "dynamic_batching { preferred_batch_size: [ 2, 4 ] }\n", max_batch_size=4
    )
    report = validate(tmp_path)
    assert not found(report, "RB302")
    assert report.ok


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("priority_levels: 3", "default priority level must be in range [1, 3] for m"),
        (
            "priority_levels: 3 default_priority_level: 2 priority_queue_policy { key: 0 value { } }",
            "priority queue policy must have priority level in range [1, 3] for m",
        ),
        (
            "preserve_ordering: true priority_levels: 2 default_priority_level: 1",
            "Only one priority level is allowed when 'preserve_ordering' is true for m",
        ),
        (
            "preserve_ordering: true default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 10 }",
            "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for m",
        ),
    ],
)
def test_dynamic_batching_queues_fail_with_triton_text_when_inconsistent(
    tmp_path: Path, block: str, message: str
) -> None:
    python_model(tmp_path, "m", IO + f"dynamic_batching {{ {block} }}\n", max_batch_size=8)
    assert _messages(tmp_path, "RB303") == [message]


def test_dynamic_batching_queues_pass_when_levels_are_in_range(tmp_path: Path) -> None:
    block = "priority_levels: 3 default_priority_level: 2 priority_queue_policy { key: 3 value { max_queue_size: 4 } }"
    python_model(tmp_path, "m", IO + f"dynamic_batching {{ {block} }}\n", max_batch_size=8)
    assert _messages(tmp_path, "RB303") == []


def _sequence(controls: str, extra: str = "") -> str:
    return IO + f"sequence_batching {{ {extra} control_input [ {controls} ] }}\n"


START = '{ name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }'


@pytest.mark.parametrize(
    ("controls", "message"),
    [
        (
            START + ', { name: "END0" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }'
            ', { name: "END1" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] }',
            "sequence batching specifies multiple CONTROL_SEQUENCE_END tensors for m",
        ),
        (
            START
            + ', { name: "START" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }',
            "sequence batching control tensor 'START' is specified for multiple control kinds for m",
        ),
        (
            '{ name: "READY" control [ { kind: CONTROL_SEQUENCE_READY } ] }',
            "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' "
            "for CONTROL_SEQUENCE_READY for m",
        ),
        (
            '{ name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 1 ] } ] }',
            "sequence batching control 'int32_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_START for m",
        ),
        (
            '{ name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] }',
            "unexpected data type for control CONTROL_SEQUENCE_CORRID for m. Allowed data types are TYPE_UINT64, "
            "TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
        ),
    ],
)
def test_sequence_controls_fail_with_triton_text_when_malformed(
    tmp_path: Path, controls: str, message: str
) -> None:
    python_model(tmp_path, "m", _sequence(controls), max_batch_size=8)
    assert _messages(tmp_path, "RB304") == [message]


def test_sequence_controls_pass_when_each_kind_is_given_once(tmp_path: Path) -> None:
    controls = (
        START + ', { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }'
    )
    python_model(
        tmp_path, "m", _sequence(controls, "oldest { preferred_batch_size: [ 4 ] }"), max_batch_size=8
    )
    report = validate(tmp_path)
    assert not found(report, "RB304")
    assert report.ok


def _state(initial: str) -> str:
    state = (
        'state [ { input_name: "S_IN" output_name: "S_OUT" data_type: TYPE_INT32 dims: [ 2 ] '
        f"initial_state: [ {initial} ] }} ]"
    )
    return IO + f"sequence_batching {{ {state} }}\n"


@pytest.mark.parametrize(
    ("initial", "message"),
    [
        (
            '{ name: "s" data_type: TYPE_INT32 dims: [ -1 ] zero_data: true }',
            "'initial_state' field for state input name 'S_IN' contains variable dimensions.",
        ),
        (
            '{ name: "s" data_type: TYPE_FP32 dims: [ 2 ] zero_data: true }',
            "The data type used for 'initial_state' field of state 'S_IN' does not match the state data type.",
        ),
        (
            "{ data_type: TYPE_INT32 dims: [ 2 ] zero_data: true }",
            "Field 'name' must be set when using initial_state for state input 'S_IN'.",
        ),
    ],
)
def test_sequence_state_fails_with_triton_text_when_initial_state_is_wrong(
    tmp_path: Path, initial: str, message: str
) -> None:
    python_model(tmp_path, "m", _state(initial), max_batch_size=8)
    assert _messages(tmp_path, "RB305") == [message]


def test_sequence_state_passes_when_initial_state_matches(tmp_path: Path) -> None:
    python_model(tmp_path, "m", _state('{ name: "s" data_type: TYPE_INT32 dims: [ 2 ] zero_data: true }'), 8)
    assert _messages(tmp_path, "RB305") == []


def _group(group: str) -> str:
    return IO + f"instance_group [ {group} ]\n"


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("{ kind: KIND_GPU }", "instance group m_0 of model m has kind KIND_GPU but no GPUs are available"),
        (
            "{ kind: KIND_CPU gpus: [ 0 ] }",
            "instance group m_0 of model m has kind KIND_CPU but specifies one or more GPUs",
        ),
        # KIND_AUTO becomes KIND_CPU without a GPU, and then its gpus are refused.
        (
            '{ name: "g" gpus: [ 0 ] }',
            "instance group g of model m has kind KIND_CPU but specifies one or more GPUs",
        ),
    ],
)
def test_instance_group_devices_fail_without_gpu_when_group_needs_one(
    tmp_path: Path, group: str, message: str
) -> None:
    python_model(tmp_path, "m", _group(group))
    assert _messages(tmp_path, "RB306", gpu_present=False) == [message]


def test_instance_group_devices_fail_when_gpu_id_is_negative(tmp_path: Path) -> None:
    python_model(tmp_path, "m", _group("{ kind: KIND_GPU gpus: [ -1 ] }"))
    [message] = _messages(tmp_path, "RB306", gpu_present=True)
    assert message.startswith("instance group m_0 of model m specifies invalid or unsupported gpu id -1.")


def test_instance_group_devices_pass_when_gpu_is_present(tmp_path: Path) -> None:
    python_model(tmp_path, "m", _group("{ kind: KIND_GPU gpus: [ 0 ] }"))
    assert _messages(tmp_path, "RB306", gpu_present=True) == []
    assert _messages(tmp_path, "RB306", gpu_present=False) != []


def test_instance_group_profile_fails_when_model_is_not_tensorrt(tmp_path: Path) -> None:
    python_model(tmp_path, "m", _group('{ kind: KIND_CPU profile: [ "0" ] }'))
    [message] = _messages(tmp_path, "RB307")
    assert "specifies profile field which is only supported for TensorRT models" in message


def test_instance_group_profile_passes_when_absent(tmp_path: Path) -> None:
    python_model(tmp_path, "m", _group("{ kind: KIND_CPU count: 2 }"))
    report = validate(tmp_path)
    assert not found(report, "RB307")
    assert report.ok


def test_instance_group_count_warns_when_negative(tmp_path: Path) -> None:
    python_model(tmp_path, "m", _group("{ kind: KIND_CPU count: -1 }"))
    report = validate(tmp_path)
    [d] = found(report, "RB308")
    assert d.severity == Severity.WARNING
    assert report.ok


def test_instance_group_count_passes_when_positive(tmp_path: Path) -> None:
    python_model(tmp_path, "m", _group("{ kind: KIND_CPU count: 3 }"))
    assert _messages(tmp_path, "RB308") == []


def test_response_cache_fails_when_model_is_decoupled(tmp_path: Path) -> None:
    body = IO + "model_transaction_policy { decoupled: true }\nresponse_cache { enable: true }\n"
    python_model(tmp_path, "m", body)
    assert _messages(tmp_path, "RB309") == [
        "Response Cache does not currently support model m with 'decoupled' transaction policy. "
        "Please disable the response cache."
    ]


def test_response_cache_passes_when_model_is_not_decoupled(tmp_path: Path) -> None:
    python_model(tmp_path, "m", IO + "response_cache { enable: true }\n")
    assert _messages(tmp_path, "RB309") == []
