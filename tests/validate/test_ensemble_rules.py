"""RB5xx: ensembles, judged after their members; one breaking and one passing repository per rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.rule_repo_helpers import errors, found, identity_model, python_model, validate, write_model

from repo_builder.validate.records import Severity

MEMBER_IO = """\
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
"""
ENSEMBLE_IO = """\
input [ { name: "data" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "prob" data_type: TYPE_FP32 dims: [ 16 ] } ]
"""


def step(model: str, inputs: dict[str, str], outputs: dict[str, str], version: int | None = -1) -> str:
    maps = "".join(f'input_map {{ key: "{k}" value: "{v}" }} ' for k, v in inputs.items())
    maps += "".join(f'output_map {{ key: "{k}" value: "{v}" }} ' for k, v in outputs.items())
    head = f'model_name: "{model}" ' + (f"model_version: {version} " if version is not None else "")
    return "{ " + head + maps + "}"


def ensemble(
    root: Path, name: str, steps: list[str], io: str = ENSEMBLE_IO, max_batch_size: int = 4, extra: str = ""
) -> Path:
    config = (
        f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: {max_batch_size}\n{io}'
        f"ensemble_scheduling {{ step [ {', '.join(steps)} ] }}\n{extra}"
    )
    return write_model(root, name, config)


def chain(root: Path, member_batch: int = 4, ensemble_batch: int = 4, version: int | None = -1) -> None:
    """data -> a -> mid -> b -> prob, members batching up to member_batch."""
    identity_model(root, "a", MEMBER_IO, member_batch)
    identity_model(root, "b", MEMBER_IO, member_batch)
    steps = [
        step("a", {"INPUT0": "data"}, {"OUTPUT0": "mid"}, version),
        step("b", {"INPUT0": "mid"}, {"OUTPUT0": "prob"}),
    ]
    ensemble(root, "e", steps, max_batch_size=ensemble_batch)


def messages(root: Path, code: str, **options: object) -> list[str]:
    return [d.message for d in found(validate(root, **options), code)]


def test_ensemble_chain_passes_every_rule_when_well_formed(tmp_path: Path) -> None:
    chain(tmp_path)
    report = validate(tmp_path)
    assert report.ok, [d.message for d in report.diagnostics]
    assert not [d for d in report.diagnostics if d.code.startswith("RB5")]


def test_scheduling_platform_fails_when_non_ensemble_has_steps(tmp_path: Path) -> None:
    identity_model(tmp_path, "a", MEMBER_IO)
    body = MEMBER_IO + 'ensemble_scheduling { step [ { model_name: "a" } ] }\n'
    python_model(tmp_path, "m", body)
    assert messages(tmp_path, "RB501") == [
        "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble"
    ]


@pytest.mark.parametrize(
    ("steps", "extra", "message"),
    [
        ([], "", "must specify 'step' for ensemble 'e'"),
        (
            ['{ model_name: "a" input_map { key: "INPUT0" value: "data" } }'],
            "",
            "must specify 'output_map' in step 0 of ensemble 'e'",
        ),
        (
            [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})],
            "instance_group [ { kind: KIND_CPU } ]",
            "instance group should not be specified for ensemble 'e'",
        ),
        (
            [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})],
            'model_warmup [ { name: "w" } ]',
            "model_warmup can not be specified for ensemble 'e'",
        ),
    ],
)
def test_ensemble_config_fails_with_triton_text_when_scheduling_is_incomplete(
    tmp_path: Path, steps: list[str], extra: str, message: str
) -> None:
    identity_model(tmp_path, "a", MEMBER_IO, 4)
    ensemble(tmp_path, "e", steps, extra=extra)
    assert messages(tmp_path, "RB502") == [message]


def test_ensemble_config_fails_when_scheduling_is_missing(tmp_path: Path) -> None:
    write_model(tmp_path, "e", 'name: "e"\nplatform: "ensemble"\n' + ENSEMBLE_IO)
    assert messages(tmp_path, "RB502") == [
        "ensemble scheduling must be set for ensemble e whose platform is ensemble"
    ]


@pytest.mark.parametrize(
    ("steps", "io", "message"),
    [
        (
            [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})],
            ENSEMBLE_IO + 'input [ { name: "extra" data_type: TYPE_FP32 dims: [ 16 ] } ]\n',
            "ensemble input 'extra' for ensemble e' is not used",
        ),
        (
            [
                step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"}),
                step("b", {"INPUT0": "ghost"}, {"OUTPUT0": "prob2"}),
            ],
            ENSEMBLE_IO + 'output [ { name: "prob2" data_type: TYPE_FP32 dims: [ 16 ] } ]\n',
            "output 'prob2' for ensemble 'e' is not written: at least one of its depending tensors, 'ghost', is not connected",
        ),
        (
            [
                step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"}),
                step("b", {"INPUT0": "data"}, {"OUTPUT0": "prob"}),
            ],
            ENSEMBLE_IO,
            "ensemble tensor 'prob' can appear in an output map only once for ensemble 'e' step 1",
        ),
        (
            [
                step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"}),
                step("b", {"INPUT0": "data"}, {"OUTPUT0": "spare"}),
            ],
            ENSEMBLE_IO,
            "ensemble tensor 'spare' is unused in ensemble 'e'",
        ),
    ],
)
def test_data_flow_fails_with_triton_text_when_tensors_do_not_connect(
    tmp_path: Path, steps: list[str], io: str, message: str
) -> None:
    identity_model(tmp_path, "a", MEMBER_IO, 4)
    identity_model(tmp_path, "b", MEMBER_IO, 4)
    ensemble(tmp_path, "e", steps, io=io)
    assert messages(tmp_path, "RB503") == [message]


def test_members_exist_fails_when_step_names_missing_model(tmp_path: Path) -> None:
    identity_model(tmp_path, "a", MEMBER_IO, 4)
    ensemble(
        tmp_path,
        "e",
        [
            step("a", {"INPUT0": "data"}, {"OUTPUT0": "mid"}),
            step("b", {"INPUT0": "mid"}, {"OUTPUT0": "prob"}),
        ],
    )
    assert messages(tmp_path, "RB504") == [
        "ensemble e contains models that are not available or ambiguous: b"
    ]
    assert not found(validate(tmp_path), "RB509")  # tensors are not judged against a missing member


def test_cycles_fail_when_ensembles_contain_each_other(tmp_path: Path) -> None:
    ensemble(tmp_path, "x", [step("y", {"data": "data"}, {"prob": "prob"})])
    ensemble(tmp_path, "y", [step("x", {"data": "data"}, {"prob": "prob"})])
    assert sorted(messages(tmp_path, "RB505")) == [
        "circular dependency between ensembles: x -> ... -> y -> x",
        "circular dependency between ensembles: y -> ... -> x -> y",
    ]


def test_cycles_pass_when_ensemble_nests_another(tmp_path: Path) -> None:
    identity_model(tmp_path, "a", MEMBER_IO, 4)
    ensemble(tmp_path, "inner", [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})])
    ensemble(tmp_path, "outer", [step("inner", {"data": "data"}, {"prob": "prob"})])
    report = validate(tmp_path)
    assert not found(report, "RB505")
    assert report.ok, [d.message for d in report.diagnostics]


def test_member_versions_fail_with_hint_when_model_version_is_omitted(tmp_path: Path) -> None:
    chain(tmp_path, version=None)  # omitted model_version means version 0
    [d] = found(validate(tmp_path), "RB506")
    assert d.message == "ensemble 'e' depends on 'a' whose required version 0 is not loaded."
    assert "-1" in (d.hint or "")


def test_member_versions_pass_when_required_version_is_loaded(tmp_path: Path) -> None:
    chain(tmp_path, version=1)
    assert messages(tmp_path, "RB506") == []


def test_member_versions_fail_when_policy_does_not_load_version(tmp_path: Path) -> None:
    chain(tmp_path, version=1)
    (tmp_path / "a" / "2").mkdir()  # latest policy loads only 2 now
    assert messages(tmp_path, "RB506") == [
        "ensemble 'e' depends on 'a' whose required version 1 is not loaded."
    ]


def test_member_refused_fails_ensemble_when_member_has_error(tmp_path: Path) -> None:
    chain(tmp_path)
    config = tmp_path / "b" / "config.pbtxt"
    config.write_text(config.read_text().replace("max_batch_size: 4", "max_batch_size: -1"))
    report = validate(tmp_path)
    assert [d.message for d in found(report, "RB507")] == ["ensemble 'e' depends on 'b' which is not valid"]
    assert {m.name: m.ok for m in report.models} == {"a": True, "b": False, "e": False}


def test_max_batch_size_fails_when_member_batches_less(tmp_path: Path) -> None:
    chain(tmp_path, member_batch=2, ensemble_batch=3)
    assert messages(tmp_path, "RB508") == [
        "ensemble e allows maximum batch size 3, but it contains model a which only allows maximum batch size to be 2",
        "ensemble e allows maximum batch size 3, but it contains model b which only allows maximum batch size to be 2",
    ]


def test_max_batch_size_passes_when_members_batch_as_much(tmp_path: Path) -> None:
    chain(tmp_path, member_batch=4, ensemble_batch=4)
    assert messages(tmp_path, "RB508") == []


def test_tensor_mapping_fails_when_key_is_not_member_input(tmp_path: Path) -> None:
    identity_model(tmp_path, "a", MEMBER_IO, 4)
    ensemble(tmp_path, "e", [step("a", {"INPUT": "data"}, {"OUTPUT0": "prob"})])
    assert messages(tmp_path, "RB509") == [
        "in ensemble e, ensemble tensor data is mapping to non-existing input INPUT in model a"
    ]


def test_tensor_mapping_fails_when_key_is_not_member_output(tmp_path: Path) -> None:
    identity_model(tmp_path, "a", MEMBER_IO, 4)
    ensemble(tmp_path, "e", [step("a", {"INPUT0": "data"}, {"OUT": "prob"})])
    assert messages(tmp_path, "RB509") == [
        "in ensemble e, ensemble tensor prob is mapped from non-existing output OUT in model a"
    ]


TWO_INPUTS = """\
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] OPTIONAL } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
"""


def test_tensor_mapping_fails_when_required_member_input_is_unmapped(tmp_path: Path) -> None:
    identity_model(tmp_path, "a", TWO_INPUTS.replace(" OPTIONAL", ""), 4)
    ensemble(tmp_path, "e", [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})])
    assert messages(tmp_path, "RB509") == [
        "in ensemble e, input INPUT1 in model a is not mapped to any ensemble tensors"
    ]


def test_tensor_mapping_passes_when_unmapped_member_input_is_optional(tmp_path: Path) -> None:
    identity_model(tmp_path, "a", TWO_INPUTS.replace(" OPTIONAL", " optional: true"), 4)
    ensemble(tmp_path, "e", [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})])
    assert messages(tmp_path, "RB509") == []


def test_tensor_mapping_judged_from_graph_when_onnx_member_io_comes_from_autocomplete(tmp_path: Path) -> None:
    from support.validate_repo_helpers import onnx_bytes

    model = onnx_bytes([("INPUT0", "FLOAT", ["batch", 16])], [("OUTPUT0", "FLOAT", ["batch", 16])])
    # No inputs/outputs in the config: ONNX Runtime fills them in from model.onnx, which validate reads.
    write_model(
        tmp_path, "a", 'name: "a"\nbackend: "onnxruntime"\nmax_batch_size: 4\n', {"1/model.onnx": model}
    )
    ensemble(tmp_path, "e", [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})])
    report = validate(tmp_path)
    assert found(report, "RB509") == []
    assert not errors(report, "e")
    ensemble(tmp_path, "bad", [step("a", {"INPUT": "data"}, {"OUTPUT0": "prob"})])
    assert [d.message for d in found(validate(tmp_path), "RB509")] == [
        "in ensemble bad, ensemble tensor data is mapping to non-existing input INPUT in model a"
    ]


def test_tensor_mapping_needs_model_file_when_python_member_fills_its_own_io(tmp_path: Path) -> None:
    model_py = (
        "class TritonPythonModel:\n    @staticmethod\n    def auto_complete_config(config):\n        return config\n\n"
        "    def execute(self, requests):\n        return requests\n"
    )
    write_model(tmp_path, "a", 'name: "a"\nbackend: "python"\nmax_batch_size: 4\n', {"1/model.py": model_py})
    ensemble(tmp_path, "e", [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})])
    report = validate(tmp_path)
    [d] = found(report, "RB509")
    assert d.severity == Severity.INFO
    assert "need the model file" in d.message


def test_tensor_consistency_fails_when_data_types_differ(tmp_path: Path) -> None:
    identity_model(tmp_path, "a", MEMBER_IO, 4)
    identity_model(tmp_path, "b", MEMBER_IO.replace("TYPE_FP32", "TYPE_INT32"), 4)
    steps = [
        step("a", {"INPUT0": "data"}, {"OUTPUT0": "mid"}),
        step("b", {"INPUT0": "mid"}, {"OUTPUT0": "prob"}),
    ]
    io = ENSEMBLE_IO.replace('"prob" data_type: TYPE_FP32', '"prob" data_type: TYPE_INT32')
    ensemble(tmp_path, "e", steps, io=io)
    assert messages(tmp_path, "RB510") == [
        "in ensemble e, ensemble tensor mid: inconsistent data type: TYPE_FP32 is inferred from model a "
        "while TYPE_INT32 is inferred from model b (model a's data_type: a/config.pbtxt:5)"
    ]


def test_tensor_consistency_fails_when_shapes_differ(tmp_path: Path) -> None:
    identity_model(tmp_path, "a", MEMBER_IO, 4)
    identity_model(tmp_path, "b", MEMBER_IO.replace("[ 16 ]", "[ 16, 16 ]"), 4)
    steps = [
        step("a", {"INPUT0": "data"}, {"OUTPUT0": "mid"}),
        step("b", {"INPUT0": "mid"}, {"OUTPUT0": "prob"}),
    ]
    io = ENSEMBLE_IO.replace(
        '"prob" data_type: TYPE_FP32 dims: [ 16 ]', '"prob" data_type: TYPE_FP32 dims: [ 16, 16 ]'
    )
    ensemble(tmp_path, "e", steps, io=io)
    assert messages(tmp_path, "RB510") == [
        "in ensemble e, ensemble tensor mid: inconsistent shape: [-1,16] is inferred from model a "
        "while [-1,16,16] is inferred from model b (model a's dims: a/config.pbtxt:5)"
    ]


def test_tensor_consistency_passes_when_non_batching_member_spells_out_batch_dim(tmp_path: Path) -> None:
    identity_model(tmp_path, "a", MEMBER_IO, 4)
    identity_model(tmp_path, "b", MEMBER_IO.replace("[ 16 ]", "[ -1, 16 ]"), 0)
    steps = [
        step("a", {"INPUT0": "data"}, {"OUTPUT0": "mid"}),
        step("b", {"INPUT0": "mid"}, {"OUTPUT0": "prob"}),
    ]
    ensemble(tmp_path, "e", steps)
    report = validate(tmp_path)
    assert not found(report, "RB510")
    assert report.ok, [d.message for d in report.diagnostics]


REPEAT_IO = """\
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
model_transaction_policy { decoupled: true }
"""
PAIR_IO = """\
input [ { name: "A" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "B" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""
INT_IO = """\
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""


def test_decoupled_branches_fail_when_step_joins_two_decoupled_members(tmp_path: Path) -> None:
    identity_model(tmp_path, "repeat", REPEAT_IO)
    identity_model(tmp_path, "pair", PAIR_IO)
    identity_model(tmp_path, "last", INT_IO)
    steps = [
        step("repeat", {"IN": "IN"}, {"OUT": "r1"}),
        step("repeat", {"IN": "IN"}, {"OUT": "r2"}),
        step("pair", {"A": "r1", "B": "r2"}, {"OUT": "joined"}),
        step("last", {"IN": "joined"}, {"OUT": "OUT"}),
    ]
    ensemble(tmp_path, "e", steps, io=INT_IO, max_batch_size=0)
    assert messages(tmp_path, "RB511") == [
        "in ensemble e, step of model 'pair' receives inputs originated from different decoupled models"
    ]


def test_decoupled_branches_name_the_ensemble_when_branches_meet_at_its_outputs(tmp_path: Path) -> None:
    identity_model(tmp_path, "repeat", REPEAT_IO)
    identity_model(tmp_path, "pair", PAIR_IO)
    steps = [
        step("repeat", {"IN": "IN"}, {"OUT": "r1"}),
        step("repeat", {"IN": "IN"}, {"OUT": "r2"}),
        step("pair", {"A": "r1", "B": "r2"}, {"OUT": "OUT"}),
    ]
    ensemble(tmp_path, "e", steps, io=INT_IO, max_batch_size=0)
    # As in Triton: the tensor node of an ensemble output belongs to the ensemble itself.
    assert messages(tmp_path, "RB511") == [
        "in ensemble e, step of model 'e' receives inputs originated from different decoupled models"
    ]


def test_decoupled_branches_pass_when_one_decoupled_member_feeds_the_rest(tmp_path: Path) -> None:
    identity_model(tmp_path, "repeat", REPEAT_IO)
    identity_model(tmp_path, "pair", PAIR_IO)
    steps = [
        step("repeat", {"IN": "IN"}, {"OUT": "r1"}),
        step("pair", {"A": "r1", "B": "r1"}, {"OUT": "OUT"}),
    ]
    ensemble(tmp_path, "e", steps, io=INT_IO, max_batch_size=0)
    report = validate(tmp_path)
    assert not found(report, "RB511")
    assert not errors(report, "e")


AUTOCOMPLETE_MODEL_PY = """\
class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        return auto_complete_model_config

    def execute(self, requests):
        return []
"""


def _configless_python_member(root: Path, model_py: str) -> None:
    """A Python member with only ``1/model.py`` (no config.pbtxt), as in fixture no_config-f59a8f3e."""
    (root / "a" / "1").mkdir(parents=True)
    (root / "a" / "1" / "model.py").write_text(model_py, encoding="utf-8")


@pytest.mark.parametrize(
    "comment", ["", '# auto_complete_config is not defined here\n"""Nor auto_complete_config here."""\n']
)
def test_tensor_mapping_fails_with_triton_text_when_configless_python_member_has_no_autocomplete(
    tmp_path: Path, comment: str
) -> None:
    from support.rule_repo_helpers import MODEL_PY

    _configless_python_member(tmp_path, comment + MODEL_PY)
    ensemble(tmp_path, "e", [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})], max_batch_size=0)
    report = validate(tmp_path)
    [d] = found(report, "RB509")
    assert d.severity == Severity.ERROR
    assert d.message == "in ensemble e, ensemble tensor data is mapping to non-existing input INPUT0 in model a"
    assert d.hint and "auto_complete_config" in d.hint
    assert not errors(report, "a")  # the member itself loads (with no inputs or outputs)


def test_tensor_mapping_needs_model_file_when_configless_python_member_has_autocomplete(tmp_path: Path) -> None:
    _configless_python_member(tmp_path, AUTOCOMPLETE_MODEL_PY)
    ensemble(tmp_path, "e", [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})], max_batch_size=0)
    report = validate(tmp_path)
    [d] = found(report, "RB509")
    assert d.severity == Severity.INFO
    assert "need the model file" in d.message
    assert report.ok


def test_tensor_mapping_needs_model_file_when_autocomplete_is_only_mentioned_outside_the_class(
    tmp_path: Path,
) -> None:
    from support.rule_repo_helpers import MODEL_PY

    # Bound later (setattr): the ast reading cannot rule it out, so it does not decide.
    source = MODEL_PY + 'setattr(TritonPythonModel, "auto_complete_config", staticmethod(lambda c: c))\n'
    _configless_python_member(tmp_path, source)
    ensemble(tmp_path, "e", [step("a", {"INPUT0": "data"}, {"OUTPUT0": "prob"})], max_batch_size=0)
    assert [d.severity for d in found(validate(tmp_path), "RB509")] == [Severity.INFO]
