"""tune's write-back as a reviewable change: the winner's values are edited where they stand in each
step's own ``config.pbtxt`` (comments, order and layout kept), the result parses with Triton's proto to
the intended config, and text this editor cannot follow is rewritten whole with the log saying so."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from repo_builder.tune.commit import change_config, write_winner
from repo_builder.tune.edit import EditError, edit_config_text, parse_fields
from repo_builder.tune.knobs import StepKnobs, apply_knobs, current_knobs, setting_of
from repo_builder.validate.engine import validate_repository

MODEL_CONFIG = """\
# The model step: ONNX Runtime inside a Python step (written by repo-builder build).
name: "t_model"
backend: "python"
max_batch_size: 8  # the batcher's largest batch
input [
  {
    name: "input_ids"
    data_type: TYPE_INT64
    dims: [ -1 ]
  },
  {
    name: "attention_mask"
    data_type: TYPE_INT64
    dims: [ -1 ]
  }
]
output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 2 ]
  }
]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
}
# Python steps run on the CPU; the stub process holds one copy of the step per instance.
instance_group [
  {
    count: 2
    kind: KIND_CPU
  }
]
# The model step's thread layout, tuned to the build machine's cores: edit the values (or rebuild with
# --instances N --intra-op-threads N) to re-tune it for another machine.
parameters {
  key: "intra_op_thread_count"
  value: { string_value: "1" }
}
parameters {
  key: "inter_op_thread_count"
  value: { string_value: "1" }
}
"""

PRE_CONFIG = """\
# Tokenizes the texts (written by repo-builder build).
name: "t_pre"
backend: "python"
max_batch_size: 8
input [ { name: "TEXT", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [
  { name: "input_ids", data_type: TYPE_INT64, dims: [ -1 ] },
  { name: "attention_mask", data_type: TYPE_INT64, dims: [ -1 ] }
]
"""

ENSEMBLE_CONFIG = """\
name: "t"
platform: "ensemble"
max_batch_size: 8
input [ { name: "TEXT", data_type: TYPE_STRING, dims: [ 1 ] } ]
output [ { name: "logits", data_type: TYPE_FP32, dims: [ 2 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "t_pre"
      model_version: -1
      input_map { key: "TEXT", value: "TEXT" }
      output_map { key: "input_ids", value: "ids" }
      output_map { key: "attention_mask", value: "mask" }
    },
    {
      model_name: "t_model"
      model_version: -1
      input_map { key: "input_ids", value: "ids" }
      input_map { key: "attention_mask", value: "mask" }
      output_map { key: "logits", value: "logits" }
    }
  ]
}
"""

MODEL_PY = "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"


def _parse(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def _changed_lines(before: str, after: str) -> list[str]:
    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for name, text in (("t", ENSEMBLE_CONFIG), ("t_pre", PRE_CONFIG), ("t_model", MODEL_CONFIG)):
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(text)
        if name != "t":
            (root / name / "1" / "model.py").write_text(MODEL_PY)
    return root


def test_write_winner_changes_only_the_two_value_lines_when_instances_and_threads_change(repo: Path) -> None:
    configs = {name: _parse((repo / name / "config.pbtxt").read_text()) for name in ("t_pre", "t_model")}
    start = setting_of({n: current_knobs(c) for n, c in configs.items()})
    assert dict(start)["t_model"] == StepKnobs(2, 1, 100)
    winner = setting_of({**dict(start), "t_model": StepKnobs(1, 2, 100)})
    logged: list[str] = []
    assert write_winner(repo, configs, winner, start, logged.append) == ["t_model"]
    after = (repo / "t_model" / "config.pbtxt").read_text()
    assert _changed_lines(MODEL_CONFIG, after) == [
        "-    count: 2", "+    count: 1",
        "-  value: { string_value: \"1\" }", "+  value: { string_value: \"2\" }",
    ]
    assert _parse(after) == apply_knobs(configs["t_model"], StepKnobs(1, 2, 100))
    assert (repo / "t_pre" / "config.pbtxt").read_text() == PRE_CONFIG
    assert any("the changed values only" in line for line in logged)
    assert validate_repository(repo).ok


def test_change_config_edits_the_batching_delay_and_keeps_every_comment() -> None:
    config = _parse(MODEL_CONFIG)
    change = change_config(MODEL_CONFIG, config, StepKnobs(2, 1, 2000))
    assert change.in_place
    assert _changed_lines(MODEL_CONFIG, change.text) == ["-  max_queue_delay_microseconds: 100", "+  max_queue_delay_microseconds: 2000"]


def test_change_config_inserts_a_missing_field_with_the_files_indentation_when_absent() -> None:
    text = MODEL_CONFIG.replace("  max_queue_delay_microseconds: 100\n", "").replace("    count: 2\n", "").replace("  ", "    ")
    config = _parse(text)
    assert current_knobs(config) == StepKnobs(1, 1, 0)
    change = change_config(text, config, StepKnobs(3, 1, 500))
    assert change.in_place, change.reason
    assert _changed_lines(text, change.text) == ["+    max_queue_delay_microseconds: 500", "+        count: 3"]
    assert _parse(change.text) == apply_knobs(config, StepKnobs(3, 1, 500))


def test_change_config_adds_an_instance_group_after_the_batcher_when_the_config_has_none() -> None:
    text = MODEL_CONFIG[: MODEL_CONFIG.index("# Python steps")] + MODEL_CONFIG[MODEL_CONFIG.index("# The model step's"):]
    config = _parse(text)
    change = change_config(text, config, StepKnobs(2, 1, 100))
    assert change.in_place, change.reason
    assert _changed_lines(text, change.text) == ["+instance_group [", "+  {", "+    count: 2", "+  }", "+]"]
    lines = change.text.splitlines()
    assert lines.index("instance_group [") == lines.index("}", lines.index("dynamic_batching {")) + 1
    assert _parse(change.text) == apply_knobs(config, StepKnobs(2, 1, 100))


def test_change_config_edits_one_line_messages_in_place() -> None:
    text = ('name: "m" backend: "python" instance_group [ { count: 4 kind: KIND_CPU } ] # four\n'
            "parameters { key: 'intra_op_thread_count' value { string_value: '4' } }\n")
    config = _parse(text)
    change = change_config(text, config, StepKnobs(2, 2))
    assert change.in_place, change.reason
    assert change.text == ('name: "m" backend: "python" instance_group [ { count: 2 kind: KIND_CPU } ] # four\n'
                           'parameters { key: \'intra_op_thread_count\' value { string_value: "2" } }\n')


def test_change_config_rewrites_whole_and_says_why_when_several_instance_groups_merge() -> None:
    text = "# two groups\nname: \"m\"\nbackend: \"python\"\ninstance_group { count: 1 kind: KIND_CPU }\ninstance_group { count: 1 kind: KIND_CPU }\n"
    config = _parse(text)
    change = change_config(text, config, StepKnobs(3))
    assert not change.in_place and "instance groups" in change.reason
    assert change.text.startswith("# Tuned by repo-builder tune")
    assert _parse(change.text) == apply_knobs(config, StepKnobs(3))


def test_edit_config_text_refuses_text_it_cannot_follow() -> None:
    with pytest.raises(EditError):
        parse_fields('name: "m" instance_group [ { count: 2 ')
    config = _parse(MODEL_CONFIG)
    with pytest.raises(EditError):
        edit_config_text('name: "m" instance_group [ { count: 2 } ', config, apply_knobs(config, StepKnobs(1, 1, 100)))


def test_change_config_keeps_a_trailing_comment_on_its_own_field_when_inserting_after_it() -> None:
    text = 'name: "m"\nbackend: "python"\ninstance_group [\n  {\n    kind: KIND_CPU  # the stub runs on the CPU\n  }\n]\n'
    config = _parse(text)
    change = change_config(text, config, StepKnobs(2))
    assert change.in_place, change.reason
    assert _changed_lines(text, change.text) == ["+    count: 2"]
    assert "    kind: KIND_CPU  # the stub runs on the CPU\n    count: 2\n" in change.text
