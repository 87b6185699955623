"""Every finding points at its element (issue 38 item 2): a valid repository, one element mutated per rule,
and the reported file, line and column checked in text, JSON, SARIF and GitHub annotations alike."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.rule_repo_helpers import identity_model, validate, write_model

from repo_builder.validate.records import Diagnostic
from repo_builder.validate.report import Report
from repo_builder.validate.reporters import RenderSettings, render_report

MEMBER_IO = """\
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
"""

# Written the way people lay configs out, one field a line, so the steps' maps repeat the same keys on
# different lines: a location taken from the first occurrence of a field or key is visibly wrong.
ENSEMBLE = """\
name: "e"
platform: "ensemble"
max_batch_size: 4
input [
  {
    name: "data"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
]
output [
  {
    name: "prob"
    data_type: TYPE_FP32
    dims: [ 16 ]
  }
]
ensemble_scheduling {
  step [
    {
      model_name: "a"
      model_version: -1
      input_map {
        key: "INPUT0"
        value: "data"
      }
      output_map {
        key: "OUTPUT0"
        value: "mid"
      }
    },
    {
      model_name: "b"
      model_version: -1
      input_map {
        key: "INPUT0"
        value: "mid"
      }
      output_map {
        key: "OUTPUT0"
        value: "prob"
      }
    }
  ]
}
"""

BACK_TO_E = """\
name: "b"
platform: "ensemble"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
ensemble_scheduling { step [ { model_name: "e" input_map { key: "data" value: "INPUT0" }
  output_map { key: "prob" value: "OUTPUT0" } } ] }
"""


def chain(root: Path) -> None:
    """data -> a -> mid -> b -> prob: passes every rule."""
    identity_model(root, "a", MEMBER_IO, 4)
    identity_model(root, "b", MEMBER_IO, 4)
    write_model(root, "e", ENSEMBLE)


def edit(root: Path, model: str, old: str, new: str, nth: int = 1) -> None:
    """Replace the ``nth`` occurrence of ``old`` in ``model``'s config.pbtxt."""
    path = root / model / "config.pbtxt"
    text = path.read_text(encoding="utf-8")
    at = -1
    for _ in range(nth):
        at = text.index(old, at + 1)
    path.write_text(text[:at] + new + text[at + len(old) :], encoding="utf-8")


def append(root: Path, model: str, text: str) -> None:
    with (root / model / "config.pbtxt").open("a", encoding="utf-8") as f:
        f.write(text)


def position(root: Path, model: str, marker: str, nth: int = 1) -> tuple[str, int, int]:
    """``model/config.pbtxt``, line and column (1-based) of the ``nth`` occurrence of ``marker``."""
    text = (root / model / "config.pbtxt").read_text(encoding="utf-8")
    at = -1
    for _ in range(nth):
        at = text.index(marker, at + 1)
    line = text.count("\n", 0, at) + 1
    return f"{model}/config.pbtxt", line, at - (text.rfind("\n", 0, at) + 1) + 1


@dataclass(frozen=True)
class Case:
    code: str
    mutate: Callable[[Path], None]
    where: tuple[str, str, int]  # model whose config holds the element, a marker at its start, which occurrence
    other: tuple[str, str, int] | None = None  # RB510: the other side, named in the message as file:line
    base: Callable[[Path], None] = chain
    model: str = "e"  # the model the finding is reported on


def _steps_in_parallel(root: Path) -> None:
    """data -> a -> x, data -> b -> y, (x, y) -> c -> prob: passes every rule."""
    identity_model(root, "a", MEMBER_IO, 4)
    identity_model(root, "b", MEMBER_IO, 4)
    identity_model(root, "c", MEMBER_IO.replace("input [ {", 'input [ { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }, {'), 4)
    steps = ENSEMBLE.replace('value: "mid"\n      }\n    },', 'value: "x"\n      }\n    },').replace(
        'key: "INPUT0"\n        value: "mid"', 'key: "INPUT0"\n        value: "data"'
    ).replace('value: "prob"', 'value: "y"')
    steps = steps.replace(
        "    }\n  ]\n}",
        '    },\n    {\n      model_name: "c"\n      model_version: -1\n      input_map { key: "INPUT0" value: "x" }\n'
        '      input_map { key: "INPUT1" value: "y" }\n      output_map { key: "OUTPUT0" value: "prob" }\n    }\n  ]\n}',
    )
    write_model(root, "e", steps)


def _decoupled(root: Path) -> None:
    for member in ("a", "b"):
        append(root, member, "model_transaction_policy { decoupled: true }\n")


CASES = {
    # The issue's own case: the second step's input_map names an input its member does not have.
    "RB509-input": Case("RB509", lambda r: edit(r, "e", 'key: "INPUT0"', 'key: "INPUTX"', 2), ("e", 'key: "INPUTX"', 1)),
    "RB509-output": Case("RB509", lambda r: edit(r, "e", 'key: "OUTPUT0"', 'key: "OUTPUTX"', 2), ("e", 'key: "OUTPUTX"', 1)),
    "RB509-unmapped": Case(
        "RB509",
        lambda r: edit(r, "b", "input [ {", 'input [ { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] }, {'),
        ("e", "input_map", 2),
    ),
    # Both sides in members: the consumer's dims, the producer's in the message.
    "RB510-member-dims": Case(
        "RB510", lambda r: edit(r, "b", "dims: [ 16 ]", "dims: [ 8 ]"), ("b", "dims: [ 8 ]", 1), ("a", "dims", 2)
    ),
    "RB510-member-type": Case(
        "RB510", lambda r: edit(r, "b", "TYPE_FP32", "TYPE_INT32"), ("b", "data_type: TYPE_INT32", 1), ("a", "data_type", 2)
    ),
    # One side is the ensemble's own output: its dims, the member's in the message.
    "RB510-ensemble-dims": Case(
        "RB510", lambda r: edit(r, "e", "dims: [ 16 ]", "dims: [ 8 ]", 2), ("e", "dims: [ 8 ]", 1), ("b", "dims", 2)
    ),
    "RB501": Case(
        "RB501",
        lambda r: edit(r, "a", "output [", 'ensemble_scheduling { step [ { model_name: "b" } ] }\noutput ['),
        ("a", "ensemble_scheduling", 1),
        model="a",
    ),
    "RB502-instances": Case(
        "RB502", lambda r: edit(r, "e", "input [", "instance_group [ { kind: KIND_CPU } ]\ninput ["), ("e", "instance_group", 1)
    ),
    "RB502-step": Case(
        "RB502",
        lambda r: edit(r, "e", 'output_map {\n        key: "OUTPUT0"\n        value: "prob"\n      }\n', "", 1),
        ("e", '{\n      model_name: "b"', 1),
    ),
    "RB503-written-twice": Case("RB503", lambda r: edit(r, "e", 'value: "prob"', 'value: "mid"'), ("e", 'value: "mid"', 3)),
    "RB503-unused-input": Case(
        "RB503",
        lambda r: edit(r, "e", "output [", 'input [ { name: "extra" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput ['),
        ("e", 'name: "extra"', 1),
    ),
    "RB504": Case("RB504", lambda r: edit(r, "e", 'model_name: "b"', 'model_name: "nope"'), ("e", 'model_name: "nope"', 1)),
    "RB505": Case(
        "RB505", lambda r: edit(r, "b", (r / "b" / "config.pbtxt").read_text(encoding="utf-8"), BACK_TO_E),
        ("e", 'model_name: "b"', 1),
    ),
    "RB506": Case("RB506", lambda r: edit(r, "e", "model_version: -1", "model_version: 3", 2), ("e", "model_version: 3", 1)),
    "RB507": Case("RB507", lambda r: edit(r, "b", "data_type: TYPE_FP32 dims", "dims"), ("e", 'model_name: "b"', 1)),
    "RB508": Case("RB508", lambda r: edit(r, "b", "max_batch_size: 4", "max_batch_size: 2"), ("e", "max_batch_size", 1)),
    # Rules of a plain model: the entry inside the block, not the block's first line.
    "RB203": Case("RB203", lambda r: edit(r, "a", "dims: [ 16 ]", "dims: [ 0 ]", 2), ("a", "dims: [ 0 ]", 1), model="a"),
    "RB302": Case(
        "RB302",
        lambda r: append(r, "a", "dynamic_batching {\n  preferred_batch_size: 2\n  preferred_batch_size: 8\n}\n"),
        ("a", "preferred_batch_size: 8", 1),
        model="a",
    ),
    "RB303": Case(
        "RB303",
        lambda r: append(
            r, "a", "dynamic_batching {\n  priority_levels: 2\n  default_priority_level: 1\n"
            "  priority_queue_policy { key: 1 value { } }\n  priority_queue_policy { key: 5 value { } }\n}\n"
        ),
        ("a", "key: 5", 1),
        model="a",
    ),
    "RB304": Case(
        "RB304",
        lambda r: append(r, "a", "sequence_batching {\n  oldest {\n    preferred_batch_size: 2\n    preferred_batch_size: 8\n  }\n}\n"),
        ("a", "preferred_batch_size: 8", 1),
        model="a",
    ),
    "RB305": Case(
        "RB305",
        lambda r: append(
            r, "a", "sequence_batching {\n  state [\n"
            '    { input_name: "s1" output_name: "o1" data_type: TYPE_FP32 dims: [ 1 ] },\n'
            '    { input_name: "s2" output_name: "o2" data_type: TYPE_FP32 dims: [ 1 ]\n      use_growable_memory: true }\n'
            "  ]\n}\n"
        ),
        ("a", "use_growable_memory", 1),
        model="a",
    ),
    "RB306": Case(
        "RB306",
        lambda r: append(r, "a", "instance_group [\n  { kind: KIND_CPU },\n  { kind: KIND_CPU gpus: [ 0 ] }\n]\n"),
        ("a", "gpus", 1),
        model="a",
    ),
    "RB307": Case(
        "RB307",
        lambda r: append(r, "a", 'instance_group [\n  { kind: KIND_CPU },\n  { kind: KIND_CPU profile: [ "0" ] }\n]\n'),
        ("a", "profile", 1),
        model="a",
    ),
    "RB308": Case(
        "RB308",
        lambda r: append(r, "a", "instance_group [\n  { kind: KIND_CPU },\n  { kind: KIND_CPU count: -1 }\n]\n"),
        ("a", "count: -1", 1),
        model="a",
    ),
    "RB511": Case("RB511", _decoupled, ("e", 'model_name: "c"', 1), base=_steps_in_parallel),
}


Location = tuple[str, int, int]


def _text_locations(text: str, code: str, model: str) -> list[Location]:
    """The ``path:line:col`` of each ``code`` finding listed under ``model``'s status line."""
    found: list[Location] = []
    current = None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            current = line.split()[0]
        match = re.fullmatch(rf" +\S+ +{code} \S+ +(\S+):(\d+):(\d+)", line)
        if match and current == model:
            found.append((match.group(1), int(match.group(2)), int(match.group(3))))
    return found


def _json_locations(text: str, code: str, model: str) -> list[Location]:
    return [
        (d["path"], d["line"], d["column"])
        for d in json.loads(text)["diagnostics"]
        if d["code"] == code and d["model"] == model
    ]


def _sarif_locations(text: str, code: str, model: str) -> list[Location]:
    found: list[Location] = []
    for result in json.loads(text)["runs"][0]["results"]:
        if result["ruleId"] == code and result["properties"]["model"] == model:
            physical = result["locations"][0]["physicalLocation"]
            region = physical["region"]
            found.append((physical["artifactLocation"]["uri"], region["startLine"], region["startColumn"]))
    return found


def _github_locations(text: str, code: str, model: str) -> list[Location]:
    pattern = rf"^::\w+ file=([^,]+),line=(\d+),col=(\d+),title={code} [^:]*::\[{model}\] "
    return [(m.group(1), int(m.group(2)), int(m.group(3))) for m in re.finditer(pattern, text, re.MULTILINE)]


READERS = {"text": _text_locations, "json": _json_locations, "sarif": _sarif_locations, "github": _github_locations}


def _only(report: Report, code: str, model: str = "e") -> Diagnostic:
    found = [d for d in report.diagnostics if d.code == code and d.model == model]
    assert len(found) == 1, report.diagnostics
    return found[0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_finding_points_at_the_mutated_element_in_every_format(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    case.base(tmp_path)
    assert not [d for d in validate(tmp_path).diagnostics if d.code.startswith("RB5")]  # the base is valid
    case.mutate(tmp_path)
    report = validate(tmp_path)
    d = _only(report, case.code, case.model)
    expected = position(tmp_path, *case.where)
    assert (d.path, d.line, d.column) == expected, d
    if case.other is not None:
        other_path, other_line, _ = position(tmp_path, *case.other)
        assert d.message.endswith(f": {other_path}:{other_line})"), d.message
    settings = RenderSettings(workspace=str(tmp_path))
    for fmt, read in READERS.items():
        assert read(render_report(report, fmt, settings=settings), case.code, case.model) == [expected], fmt


def test_map_key_found_when_the_step_is_written_on_one_line(tmp_path: Path) -> None:
    """Steps in the compact list form, as the builder writes them: still the second step's entry."""
    chain(tmp_path)
    compact = re.sub(r"\n\s*", " ", ENSEMBLE.split("ensemble_scheduling")[1])
    write_model(tmp_path, "e", ENSEMBLE.split("ensemble_scheduling")[0] + "ensemble_scheduling" + compact + "\n")
    edit(tmp_path, "e", 'key: "INPUT0"', 'key: "INPUTX"', 2)
    d = _only(validate(tmp_path), "RB509")
    assert (d.path, d.line, d.column) == position(tmp_path, "e", 'key: "INPUTX"')
