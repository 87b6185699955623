"""validate's fast config parser (repo_builder/validate/fast_config.py) gives exactly protobuf
``text_format``'s message or nothing, whatever the text (issue 38: validate's speed without a looser
verdict). Every config the other validate tests scan is checked the same way (conftest.py)."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from repo_builder.triton_config import ConfigParseError, parse_config_text
from repo_builder.validate.fast_config import parse_common_config
from repo_builder.validate.scan import scan_repository

ROOT = Path(__file__).resolve().parents[2]
TYPICAL = '''# exported by repo-builder
name: "text_encoder"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 16 ] optional: true } ]
output [
  { name: "OUTPUT0", data_type: TYPE_INT64, dims: [ 16 ] reshape: { shape: [ ] } }
];
dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100 }
instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0 ] } ]
parameters { key: "EXECUTION_ENV_PATH" value: { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }
parameters: { key: "é" value: { string_value: "" } }
version_policy: { latest { num_versions: 2 } }
'''
ENSEMBLE = '''name: "e" platform: "ensemble"
ensemble_scheduling { step [ { model_name: "a" model_version: -1 input_map { key: "x" value: "IN" } } ] }
'''


def _reference(text: str) -> object | None:
    try:
        return parse_config_text(text, "config.pbtxt")
    except ConfigParseError:
        return None


def _agrees(text: str) -> bool:
    """The property: the fast path gives text_format's message, or nothing."""
    fast = parse_common_config(text)
    return fast is None or fast == _reference(text)


def test_fast_config_equals_text_format_when_config_is_typical() -> None:
    fast = parse_common_config(TYPICAL)
    assert fast is not None and fast == _reference(TYPICAL)
    assert fast.HasField("dynamic_batching") and fast.output[0].HasField("reshape")
    assert fast.parameters["é"].string_value == ""
    ensemble = parse_common_config(ENSEMBLE)
    assert ensemble is not None and ensemble == _reference(ENSEMBLE)
    assert ensemble.ensemble_scheduling.step[0].input_map["x"] == "IN"


@pytest.mark.parametrize(
    "text",
    [
        'name: "a\\"b"',  # an escape
        "name: 'a'",  # single quotes
        'name: "a" "b"',  # adjacent strings concatenate
        "max_batch_size: 0x10",  # hex
        "max_batch_size: 010",  # octal
        "max_batch_size: 2147483648",  # out of int32
        "max_batch_size: 0 max_batch_size: 8",  # text_format takes this one (0 is the default)
        "max_batch_size: 8 max_batch_size: 8",  # and refuses this one
        "input { name: \"a\" optional: 1 }",  # a bool as a number
        "input { name: \"a\" data_type: 11 }",  # an enum by number
        "input { name: \"a\" data_type: TYPE_NOPE }",
        "version_policy { latest { } all { } }",  # two members of a oneof
        "dynamic_batching { } dynamic_batching { }",  # a message twice
        "input < name: \"a\" >",
        "dims: [ 1, ]",
        "input [ { name: \"a\" dims: [ 1, ] } ]",  # a trailing comma
        "nope: 1",
        "name \"a\"",  # no colon before a scalar
        "name: \"a\",,",
        "input { name: \"a\"",  # not closed
        "}",
        "parameters { key: \"k\" value { string_value: \"a\" } } parameters { key: \"k\" value { } }",  # key twice
        "\ufeffname: \"a\"",  # a byte-order mark
        "max_batch_size: 8name: \"a\"",
        "max_batch_size: \u0663",  # int() reads an Arabic-Indic 3; text_format does not
        "max_batch_size: -",
        "max_batch_size: +8",
    ],
)
def test_fast_config_leaves_text_to_text_format_when_outside_subset(text: str) -> None:
    assert parse_common_config(text) is None


def test_fast_config_agrees_with_text_format_on_every_config_file_in_the_project() -> None:
    files = [p for p in ROOT.rglob("*.pbtxt") if ".venv" not in p.parts]
    assert len(files) >= 10
    accepted = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert _agrees(text), path
        accepted += parse_common_config(text) is not None
    assert accepted >= len(files) * 3 // 4  # the fast path is the common case, not a stub


def test_scan_uses_one_reader_words_when_config_is_outside_subset(tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text('name: "m"\nmax_batch_size: 8 max_batch_size: 4\n', encoding="utf-8")
    (model,) = scan_repository(tmp_path).models
    assert model.config is None and model.config_line == 2
    assert model.config_problem is not None and 'should not have multiple "max_batch_size" fields' in model.config_problem


# Generated texts: Triton's own field names and values, valid and not, in every layout text_format reads.
FIELDS = [
    "name", "platform", "backend", "max_batch_size", "input", "output", "dims", "data_type", "optional",
    "reshape", "shape", "instance_group", "kind", "count", "gpus", "dynamic_batching", "preferred_batch_size",
    "max_queue_delay_microseconds", "parameters", "key", "value", "string_value", "ensemble_scheduling", "step",
    "model_name", "model_version", "input_map", "output_map", "version_policy", "latest", "all", "specific",
    "num_versions", "versions", "sequence_batching", "oldest", "direct", "response_cache", "enable",
    "default_model_filename", "priority_levels", "default_queue_policy", "timeout_action", "model_warmup",
    "batch_size", "inputs", "zero_data", "is_shape_tensor", "nope",
]
VALUES = [
    '"x"', '""', '"é"', '"a\\"b"', "'x'", '"unterminated', "TYPE_FP32", "TYPE_STRING", "KIND_CPU", "KIND_GPU",
    "REJECT", "true", "false", "t", "1", "0", "-1", "16", "-0", "0x10", "010", "1.5", "1e3", "1.5f", ".5", "inf",
    "nan", "4294967296", "2147483648", "-2147483649", "18446744073709551616", "1_0",
]
PUNCT = ["{", "}", "[", "]", ":", ",", ";", "<", ">", "{ }", "[ ]"]
SPACE = [" ", "  ", "\n", "\t", "\r\n", "\u00a0", "\x0c", " # a comment\n", "#\n"]


@st.composite
def _message(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 5))):
        name = draw(st.sampled_from(FIELDS))
        sep = draw(st.sampled_from(SPACE))
        form = draw(st.integers(0, 4 if depth < 3 else 1))
        if form == 0:
            value = f"{name}:{sep}{draw(st.sampled_from(VALUES))}"
        elif form == 1:
            items = draw(st.lists(st.sampled_from(VALUES), max_size=3))
            value = f"{name}: [{', '.join(items)}]"
        elif form == 2:
            value = f"{name} {{{sep}{draw(_message(depth + 1))}}}"
        elif form == 3:
            value = f"{name}: {{ {draw(_message(depth + 1))} }}"
        else:
            items = [draw(_message(depth + 1)) for _ in range(draw(st.integers(0, 2)))]
            value = f"{name} [ {', '.join('{ ' + i + ' }' for i in items)} ]"
        parts.append(value + draw(st.sampled_from(["", ",", ";", ",,"])))
    return draw(st.sampled_from(SPACE)).join(parts)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_message())
def test_fast_config_agrees_with_text_format_when_config_is_generated(text: str) -> None:
    assert _agrees(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FIELDS + VALUES + PUNCT + SPACE + list(string.punctuation)), max_size=30))
def test_fast_config_agrees_with_text_format_when_tokens_are_random(tokens: list[str]) -> None:
    assert _agrees(" ".join(tokens))
