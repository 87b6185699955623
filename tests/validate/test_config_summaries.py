"""The one-pass summaries of a config's tensors and instance groups (analysis/shapes.py ``io_summary``,
analysis/devices.py ``group_summary``) that the engine's quiet flags come from. They read the rarely set
fields only when the config text writes their names: each such field, set, must still lower its flag, and a
word in a comment must change nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_builder.validate.analysis.devices import group_summary
from repo_builder.validate.analysis.shapes import io_summary
from repo_builder.validate.records import ModelEntry
from repo_builder.validate.scan import scan_repository

IO = 'input [{ name: "I" data_type: TYPE_FP32 dims: [ 4 ] }] output [{ name: "O" data_type: TYPE_FP32 dims: [ 4 ] }]'


def _model(tmp_path: Path, config: str) -> ModelEntry:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(f'name: "m" backend: "python" {config}\n')
    [model] = scan_repository(tmp_path).models
    assert model.config is not None, model.config_problem
    return model


@pytest.mark.parametrize(
    ("config", "flag"),
    [
        ('input [{ name: "I" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } }]', "plain_shapes"),
        ('input [{ name: "I" data_type: TYPE_INT32 dims: [ 1 ] is_shape_tensor: true }]', "plain_features"),
        ('input [{ name: "I" data_type: TYPE_FP32 dims: [ 4 ] is_non_linear_format_io: true }]', "plain_features"),
        ('input [{ name: "I" data_type: TYPE_FP32 dims: [ 3, 2, 2 ] format: FORMAT_NCHW }]', "plain_features"),
        ('output [{ name: "O" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" }]', "no_labels"),
        ('input [{ name: "I" data_type: TYPE_STRING dims: [ 1 ] }]', "plain_features"),
        ('input [{ name: "I" data_type: TYPE_FP32 dims: [ 0 ] }]', "plain_shapes"),
    ],
)
def test_io_summary_lowers_the_flag_when_a_rare_tensor_field_is_set(tmp_path: Path, config: str, flag: str) -> None:
    summary = io_summary(_model(tmp_path, config))
    assert getattr(summary, flag) is False
    assert all(value for name, value in summary._asdict().items() if name != flag)


@pytest.mark.parametrize(
    ("config", "kinds", "gpus", "profile", "odd"),
    [
        ("instance_group [{ kind: KIND_GPU gpus: [ 0 ] }]", (1,), True, False, False),
        ('instance_group [{ kind: KIND_GPU profile: [ "0" ] }]', (1,), False, True, False),
        ("instance_group [{ kind: KIND_CPU count: -1 }]", (2,), False, False, True),
        ("instance_group [{ kind: KIND_GPU secondary_devices [{ kind: KIND_NVDLA device_id: 0 }] }]", (1,), False, False, True),
        ("instance_group [{ kind: KIND_CPU count: 2 }, { }]", (2, 0), False, False, False),
    ],
)
def test_group_summary_sees_every_rare_group_field(
    tmp_path: Path, config: str, kinds: tuple[int, ...], gpus: bool, profile: bool, odd: bool
) -> None:
    assert tuple(group_summary(_model(tmp_path, config))) == (kinds, gpus, profile, odd)


def test_words_in_comments_or_names_change_no_summary(tmp_path: Path) -> None:
    words = "# reshape is_shape_tensor is_non_linear_format_io format label_filename gpus profile secondary_devices\n"
    plain = _model(tmp_path / "plain", IO + " instance_group [{ kind: KIND_CPU }]")
    commented = _model(tmp_path / "commented", words + IO.replace('"I"', '"format_gpus"') + " instance_group [{ kind: KIND_CPU }]")
    assert io_summary(plain) == io_summary(commented) == (True, True, True, True, True)
    assert group_summary(plain) == group_summary(commented) == ((2,), False, False, False)


def test_every_field_a_config_sets_is_named_in_its_text() -> None:
    """The pre-screen's premise: the text format names every field it sets, unless the proto has extensions
    or ``Any`` fields (written by type URL). Triton's ModelConfig has neither; a proto update adding one fails
    here first."""
    from tritonclient.grpc import model_config_pb2

    seen: set[str] = set()
    pending = [model_config_pb2.ModelConfig.DESCRIPTOR]
    while pending:
        message = pending.pop()
        if message.full_name in seen:
            continue
        seen.add(message.full_name)
        assert not message.extension_ranges, message.full_name
        for field in message.fields:
            if field.message_type is not None:
                assert field.message_type.full_name != "google.protobuf.Any", field.full_name
                pending.append(field.message_type)
    assert len(seen) > 20  # the walk reached the nested messages
