"""RB2xx: config parsing, tensor declarations, batch IO, labels, warmup; one breaking and one passing
repository per rule, validated through the engine with every registered rule."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.rule_repo_helpers import IO, errors, found, python_model, validate, write_model

from repo_builder.validate.records import Severity


def test_config_parses_fails_with_line_and_column_when_field_is_unknown(tmp_path: Path) -> None:
    write_model(tmp_path, "m", 'name: "m"\nbackend: "python"\nmax_batch_sise: 8\n', {"1/model.py": "x = 1\n"})
    [d] = found(validate(tmp_path), "RB201", "m")
    assert d.severity == Severity.ERROR
    assert "max_batch_sise" in d.message
    assert (d.line, d.column) == (3, 1)


def test_config_parses_passes_when_text_is_valid(tmp_path: Path) -> None:
    python_model(tmp_path, "m")
    report = validate(tmp_path)
    assert not found(report, "RB201")
    assert report.ok


def test_io_fields_fail_with_triton_text_when_strict_and_data_type_missing(tmp_path: Path) -> None:
    python_model(
        tmp_path, "m", 'input [ { name: "x" dims: [ 4 ] } ]\noutput [ { name: "y" data_type: TYPE_FP32 } ]\n'
    )
    report = validate(tmp_path, strict=True)
    assert {d.message for d in found(report, "RB202")} == {
        "model input 'x' must specify 'data_type' for m",
        "model output 'y' must specify 'dims' for m",
    }
    assert all(d.severity == Severity.ERROR for d in found(report, "RB202"))


def test_io_fields_fail_by_default_when_backend_fills_in_nothing(tmp_path: Path) -> None:
    # model.py has no auto_complete_config, so Triton checks the config as written.
    python_model(tmp_path, "m", 'input [ { name: "x" data_type: TYPE_FP32 } ]\n' + IO)
    [d] = found(validate(tmp_path), "RB202")
    assert d.severity == Severity.ERROR
    assert d.message == "model input 'x' must specify 'dims' for m"


def test_io_fields_note_needs_model_file_when_backend_autocompletes(tmp_path: Path) -> None:
    write_model(tmp_path, "m", 'name: "m"\nbackend: "tensorrt"\ninput [ { name: "x" dims: [ 4 ] } ]\n')
    [d] = found(validate(tmp_path), "RB202")
    assert d.severity == Severity.INFO
    assert "needs the model file" in d.message
    assert found(validate(tmp_path, strict=True), "RB202")[0].severity == Severity.ERROR


@pytest.mark.parametrize(
    "head",
    [
        'backend: "onnxruntime"',  # fills inputs only when the config declares none (onnxruntime.cc input_cnt == 0)
        'platform: "tensorflow_graphdef"',  # GraphDef auto-completes nothing
        'backend: "pytorch"',
    ],
)
def test_io_fields_fail_when_backend_does_not_fill_declared_tensors(tmp_path: Path, head: str) -> None:
    write_model(tmp_path, "m", f'name: "m"\n{head}\ninput [ {{ name: "x" dims: [ 4 ] }} ]\n')
    [d] = found(validate(tmp_path), "RB202")
    assert d.severity == Severity.ERROR
    assert d.message == "model input 'x' must specify 'data_type' for m"
    assert d.line == 3 and d.column is not None  # points at the tensor in config.pbtxt


def test_io_fields_pass_when_declared(tmp_path: Path) -> None:
    python_model(tmp_path, "m")
    assert not found(validate(tmp_path, strict=True), "RB202")


@pytest.mark.parametrize(
    ("tensor", "max_batch_size", "message"),
    [
        (
            "dims: [ 1, 0, 28 ]",
            8,
            "model input 'x' dimension must be integer >= 1, or -1 to indicate a variable-size dimension",
        ),
        (
            "dims: [ 1, 3, 2 ] reshape { shape: [ 5 ] }",
            4,
            "model input 'x' has different size for dims and reshape",
        ),
        (
            "dims: [ 2, -1 ] reshape { shape: [ 2, 2 ] }",
            0,
            "model input 'x' has different size for dims and reshape",
        ),
        (
            "dims: [ 2, -1 ] reshape { shape: [ 2, -1, -1 ] }",
            0,
            "model input 'x' has different number of variable-size dimensions for dims and reshape",
        ),
        (
            "dims: [ 2, 2 ] reshape { shape: [ 0 ] }",
            4,
            "model input 'x' reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension",
        ),
        (
            "dims: [ 1 ] reshape { shape: [ ] }",
            0,
            "model input 'x' cannot have empty reshape for non-batching model as scalar tensors are not supported",
        ),
    ],
)
def test_io_shapes_fail_with_triton_text_when_dims_or_reshape_are_wrong(
    tmp_path: Path, tensor: str, max_batch_size: int, message: str
) -> None:
    body = f'input [ {{ name: "x" data_type: TYPE_FP32 {tensor} }} ]\n' + IO
    python_model(tmp_path, "m", body, max_batch_size=max_batch_size)
    assert [d.message for d in found(validate(tmp_path), "RB203")] == [f"{message} for m"]


@pytest.mark.parametrize(
    ("tensor", "max_batch_size"),
    [
        ("dims: [ 2, 4, -1, 6 ] reshape { shape: [ 8, -1, 1, 6 ] }", 0),
        ("dims: [ 1 ] reshape { shape: [ ] }", 8),
        ("dims: [ -1, 3 ]", 0),
    ],
)
def test_io_shapes_pass_when_dims_and_reshape_agree(tmp_path: Path, tensor: str, max_batch_size: int) -> None:
    python_model(
        tmp_path, "m", f'input [ {{ name: "x" data_type: TYPE_FP32 {tensor} }} ]\n' + IO, max_batch_size
    )
    assert not found(validate(tmp_path), "RB203")


def test_io_features_fail_when_shape_tensor_is_not_tensorrt(tmp_path: Path) -> None:
    body = 'input [ { name: "x" data_type: TYPE_INT32 dims: [ 2 ] is_shape_tensor: true } ]\n' + IO
    python_model(tmp_path, "m", body)
    assert [d.message for d in found(validate(tmp_path), "RB204")] == [
        "shape tensors are only supported for TensorRT platform for m"
    ]


def test_io_features_fail_when_nchw_input_has_two_dims(tmp_path: Path) -> None:
    python_model(
        tmp_path,
        "m",
        'input [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 28, 28 ] } ]\n' + IO,
    )
    assert [d.message for d in found(validate(tmp_path), "RB204")] == [
        "model input NHWC/NCHW require 3 dims for m"
    ]


def test_io_features_pass_when_nchw_input_has_three_dims(tmp_path: Path) -> None:
    python_model(
        tmp_path,
        "m",
        'input [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 1, 28, 28 ] } ]\n' + IO,
    )
    assert not found(validate(tmp_path), "RB204")


def test_duplicate_names_warn_when_input_declared_twice(tmp_path: Path) -> None:
    python_model(tmp_path, "m", 'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n' + IO)
    report = validate(tmp_path)
    [d] = found(report, "RB205")
    assert d.severity == Severity.WARNING and "INPUT0" in d.message
    assert report.ok


def test_duplicate_names_pass_when_unique(tmp_path: Path) -> None:
    python_model(tmp_path, "m")
    assert not found(validate(tmp_path), "RB205")


BATCH_IO = IO.replace("dims: [ 4 ] } ]\noutput", "dims: [ -1 ] } ]\noutput")


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 } ]',
            "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 source input, got 0",
        ),
        (
            'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 source_input: "NOPE" } ]',
            "unknown source input name 'NOPE'",
        ),
        (
            'batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: ["OUTPUT0", "OUTPUT0"] source_input: "INPUT0" } ]',
            "target output name 'OUTPUT0' can only be specified once",
        ),
        (
            'batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "NOPE" source_input: "INPUT0" } ]',
            "unknown target output name 'NOPE'",
        ),
    ],
)
def test_batch_io_fails_with_triton_text_when_sources_or_targets_are_wrong(
    tmp_path: Path, block: str, message: str
) -> None:
    python_model(tmp_path, "m", BATCH_IO + block + "\n", max_batch_size=4)
    assert [d.message for d in found(validate(tmp_path), "RB206")] == [f"{message} for m"]


def test_batch_io_passes_when_source_and_target_exist(tmp_path: Path) -> None:
    block = (
        'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 source_input: "INPUT0" } ]\n'
        'batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE target_name: "OUTPUT0" source_input: "INPUT0" } ]\n'
    )
    python_model(tmp_path, "m", BATCH_IO + block, max_batch_size=4)
    assert not found(validate(tmp_path), "RB206")


LABELLED = """\
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "labels.txt" } ]
"""


def test_label_files_fail_when_labels_file_is_missing(tmp_path: Path) -> None:
    python_model(tmp_path, "m", LABELLED)
    [d] = found(validate(tmp_path), "RB207")
    assert "labels.txt" in d.message and d.severity == Severity.ERROR
    assert d.path == "m/labels.txt"


def test_label_files_fail_when_path_leaves_model_folder(tmp_path: Path) -> None:
    python_model(tmp_path, "m", LABELLED.replace('"labels.txt"', '"../labels.txt"'))
    (tmp_path / "labels.txt").write_text("cat\n")
    [d] = found(validate(tmp_path), "RB207")
    assert "is outside model directory" in d.message


def test_label_files_pass_when_labels_file_is_beside_config(tmp_path: Path) -> None:
    python_model(tmp_path, "m", LABELLED, files={"labels.txt": "a\nb\nc\nd\n"})
    report = validate(tmp_path)
    assert not found(report, "RB207")
    assert report.ok


def _warmup(inputs: str) -> str:
    return (
        IO
        + f'model_warmup [ {{ name: "w" batch_size: 1 inputs {{ key: "INPUT0" value {{ {inputs} }} }} }} ]\n'
    )


@pytest.mark.parametrize(
    ("inputs", "files", "message"),
    [
        (
            "data_type: TYPE_FP32 dims: [ -1 ] zero_data: true",
            {},
            "warmup setting expects all variable-size dimensions are specified for input 'INPUT0'",
        ),
        (
            "data_type: TYPE_FP32 dims: [ 4 ]",
            {},
            "warmup setting expects input 'INPUT0' to have input_data_type set",
        ),
        (
            'data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "in.bin"',
            {},
            "warmup data file 'in.bin' for input 'INPUT0' does not exist in m/warmup/",
        ),
        (
            'data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "in.bin"',
            {"warmup/in.bin": b"\0" * 8},
            "warmup setting expects 16 bytes, but the data provided from in.binonly has 8 bytes",  # sic, as Triton
        ),
    ],
)
def test_model_warmup_fails_when_sample_cannot_be_built(
    tmp_path: Path, inputs: str, files: dict[str, bytes], message: str
) -> None:
    python_model(tmp_path, "m", _warmup(inputs), files=files)
    assert message in [d.message for d in errors(validate(tmp_path), "m")]


def test_model_warmup_passes_when_data_file_is_big_enough(tmp_path: Path) -> None:
    inputs = 'data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "in.bin"'
    python_model(tmp_path, "m", _warmup(inputs), files={"warmup/in.bin": b"\0" * 16})
    report = validate(tmp_path)
    assert not found(report, "RB208")
    assert report.ok



BATCH_NOTE = (
    " NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to "
    "each input shape. If you want to specify the full shape including the batch dim in your input dims config, "
    "try setting max_batch_size to zero. See the model configuration docs for more info on max_batch_size."
)


def _warmup_model(tmp_path: Path, declared: str, fed: str, max_batch_size: int = 0, files: dict | None = None) -> None:
    io = (
        f'input [ {{ name: "INPUT0" {declared} }} ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )
    sample = f'model_warmup [ {{ name: "w" batch_size: 1 inputs {{ key: "INPUT0" value {{ {fed} }} }} }} ]\n'
    python_model(tmp_path, "m", io + sample, max_batch_size=max_batch_size, files=files)


# Each case's text was read from the real 2.51 refusing the same repository ("load failed for model 'm':
# version 1 is at UNAVAILABLE state: Invalid argument: [request id: <id_unknown>] <text>;").
@pytest.mark.parametrize(
    ("declared", "fed", "max_batch_size", "files", "message"),
    [
        (
            "data_type: TYPE_FP32 dims: [ 4 ]",
            "data_type: TYPE_INT32 dims: [ 4 ] zero_data: true",
            0,
            {},
            "inference input 'INPUT0' data-type is 'INT32', but model 'm' expects 'FP32'",
        ),
        (
            "data_type: TYPE_FP32 dims: [ 4 ]",
            "data_type: TYPE_FP16 dims: [ 4 ] random_data: true",
            8,
            {},
            "inference input 'INPUT0' data-type is 'FP16', but model 'm' expects 'FP32'",
        ),
        (
            "data_type: TYPE_STRING dims: [ 2 ]",
            'data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "in.bin"',
            0,
            {"warmup/in.bin": b"\0" * 8},
            "inference input 'INPUT0' data-type is 'FP32', but model 'm' expects 'BYTES'",
        ),
        (
            "data_type: TYPE_FP32 dims: [ 4 ]",
            "data_type: TYPE_FP32 dims: [ 5 ] zero_data: true",
            0,
            {},
            "unexpected shape for input 'INPUT0' for model 'm'. Expected [4], got [5].",
        ),
        (
            "data_type: TYPE_FP32 dims: [ -1 ]",
            "data_type: TYPE_FP32 dims: [ 7, 1 ] random_data: true",
            0,
            {},
            "unexpected shape for input 'INPUT0' for model 'm'. Expected [-1], got [7,1].",
        ),
        (
            "data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] }",
            'data_type: TYPE_FP32 dims: [ 2, 2 ] input_data_file: "in.bin"',
            0,
            {"warmup/in.bin": b"\0" * 16},
            "unexpected shape for input 'INPUT0' for model 'm'. Expected [4], got [2,2].",
        ),
        (  # the warmup dims include the batch dimension, which Triton prepends itself
            "data_type: TYPE_FP32 dims: [ 4 ]",
            "data_type: TYPE_FP32 dims: [ 1, 4 ] zero_data: true",
            8,
            {},
            "unexpected shape for input 'INPUT0' for model 'm'. Expected [-1,4], got [1,1,4]." + BATCH_NOTE,
        ),
        (
            "data_type: TYPE_FP32 dims: [ -1, 3 ]",
            "data_type: TYPE_FP32 dims: [ 5, 2 ] zero_data: true",
            4,
            {},
            "unexpected shape for input 'INPUT0' for model 'm'. Expected [-1,-1,3], got [1,5,2]." + BATCH_NOTE,
        ),
    ],
)
def test_model_warmup_fails_with_triton_text_when_sample_does_not_match_input(
    tmp_path: Path, declared: str, fed: str, max_batch_size: int, files: dict, message: str
) -> None:
    _warmup_model(tmp_path, declared, fed, max_batch_size, files)
    [d] = found(validate(tmp_path), "RB208")
    assert (d.severity, d.message) == (Severity.ERROR, message)


@pytest.mark.parametrize(
    ("declared", "fed", "max_batch_size", "files"),
    [
        ("data_type: TYPE_FP32 dims: [ 4 ]", "data_type: TYPE_FP32 dims: [ 4 ] zero_data: true", 0, {}),
        ("data_type: TYPE_FP32 dims: [ 4 ]", "data_type: TYPE_FP32 dims: [ 4 ] random_data: true", 8, {}),
        ("data_type: TYPE_FP32 dims: [ -1 ]", "data_type: TYPE_FP32 dims: [ 7 ] zero_data: true", 0, {}),
        ("data_type: TYPE_FP32 dims: [ -1, 3 ]", "data_type: TYPE_FP32 dims: [ 5, 3 ] random_data: true", 4, {}),
        ("data_type: TYPE_STRING dims: [ 2 ]", "data_type: TYPE_STRING dims: [ 2 ] zero_data: true", 0, {}),
        (  # Triton compares the warmup dims with dims, not with reshape
            "data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 2 ] }",
            'data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "in.bin"',
            0,
            {"warmup/in.bin": b"\0" * 20},
        ),
    ],
)
def test_model_warmup_passes_when_sample_matches_input(
    tmp_path: Path, declared: str, fed: str, max_batch_size: int, files: dict
) -> None:
    _warmup_model(tmp_path, declared, fed, max_batch_size, files)
    report = validate(tmp_path)
    assert not found(report, "RB208")
    assert report.ok


def test_model_warmup_fails_when_autocompleting_model_declares_the_input_with_another_data_type(
    tmp_path: Path,
) -> None:
    # auto_complete_config may add inputs but keeps a declared one, so the mismatch is certain.
    autocomplete_py = (
        "class TritonPythonModel:\n"
        "    def auto_complete_config(auto_complete_model_config):\n"
        "        return auto_complete_model_config\n\n"
        "    def execute(self, requests):\n"
        "        return []\n"
    )
    fed = "data_type: TYPE_INT32 dims: [ 4 ] zero_data: true"
    _warmup_model(tmp_path / "bad", "data_type: TYPE_FP32 dims: [ 4 ]", fed, files={"1/model.py": autocomplete_py})
    _warmup_model(tmp_path / "good", "data_type: TYPE_INT32 dims: [ 4 ]", fed, files={"1/model.py": autocomplete_py})
    assert [d.message for d in errors(validate(tmp_path / "bad"), "m")] == [
        "inference input 'INPUT0' data-type is 'INT32', but model 'm' expects 'FP32'"
    ]
    assert not found(validate(tmp_path / "good"), "RB208")


def test_model_warmup_reports_data_type_and_file_size_when_both_are_wrong(tmp_path: Path) -> None:
    # The server stops at the file size (the sample is built before it runs); both must be fixed.
    _warmup_model(
        tmp_path,
        "data_type: TYPE_FP32 dims: [ 4 ]",
        'data_type: TYPE_INT64 dims: [ 4 ] input_data_file: "in.bin"',
        files={"warmup/in.bin": b"\0" * 16},
    )
    assert [d.message for d in errors(validate(tmp_path), "m")] == [
        "inference input 'INPUT0' data-type is 'INT64', but model 'm' expects 'FP32'",
        "warmup setting expects 32 bytes, but the data provided from in.binonly has 16 bytes",
    ]


def test_model_warmup_warns_only_when_extra_input_has_any_data_type(tmp_path: Path) -> None:
    # An input the model does not declare becomes an override input: the real server loads the model.
    extra = 'inputs { key: "NOPE" value { data_type: TYPE_INT8 dims: [ 9 ] zero_data: true } }'
    sample = _sample(["INPUT0"]).replace(" } ]\n", f" {extra} }} ]\n")
    python_model(tmp_path, "m", IO + sample, max_batch_size=8)
    report = validate(tmp_path)
    assert "NOPE" in sample
    assert [d.severity for d in found(report, "RB208")] == [Severity.WARNING]
    assert report.ok


def _sample(feeds: list[str], batch: str = "batch_size: 1 ") -> str:
    inputs = " ".join(
        f'inputs {{ key: "{n}" value {{ data_type: TYPE_FP32 dims: [ 4 ] zero_data: true }} }}' for n in feeds
    )
    return f'model_warmup [ {{ name: "w" {batch}{inputs} }} ]\n'


TWO_INPUTS = """\
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] OPTIONAL} ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


@pytest.mark.parametrize(
    ("io", "feeds", "message"),
    [
        (  # recorded from the server: fixture warmup_bad_input-c6ef66e4
            IO,
            ["NOPE"],
            "expected 1 inputs but got 0 inputs for model 'm'. Got input(s) [], but missing required "
            "input(s) ['INPUT0']. Please provide all required input(s).",
        ),
        (
            TWO_INPUTS.replace(" OPTIONAL", ""),
            ["INPUT1"],
            "expected 2 inputs but got 1 inputs for model 'm'. Got input(s) ['INPUT1'], but missing required "
            "input(s) ['INPUT0']. Please provide all required input(s).",
        ),
        (
            TWO_INPUTS.replace(" OPTIONAL", " optional: true"),
            ["NOPE"],
            "expected number of inputs between 1 and 2 but got 0 inputs for model 'm'. Got input(s) [], "
            "but missing required input(s) ['INPUT0']. Please provide all required input(s).",
        ),
    ],
)
def test_model_warmup_fails_with_triton_text_when_required_input_is_not_fed(
    tmp_path: Path, io: str, feeds: list[str], message: str
) -> None:
    python_model(tmp_path, "m", io + _sample(feeds), max_batch_size=8)
    report = validate(tmp_path)
    assert [d.message for d in errors(report, "m")] == [message]


def test_model_warmup_passes_when_only_optional_input_is_left_out(tmp_path: Path) -> None:
    io = TWO_INPUTS.replace(" OPTIONAL", " optional: true")
    python_model(tmp_path, "m", io + _sample(["INPUT0"]), max_batch_size=8)
    report = validate(tmp_path)
    assert not found(report, "RB208")
    assert report.ok


def test_model_warmup_warns_only_when_extra_unknown_input_is_fed_with_the_required_ones(tmp_path: Path) -> None:
    python_model(tmp_path, "m", IO + _sample(["INPUT0", "NOPE"]), max_batch_size=8)
    report = validate(tmp_path)
    assert [d.severity for d in found(report, "RB208")] == [Severity.WARNING]
    assert report.ok


def test_model_warmup_passes_when_sample_has_batch_size_zero(tmp_path: Path) -> None:
    # Triton skips batch-0 samples ("Skipping batch 0 warmup sample"), whatever they feed.
    python_model(tmp_path, "m", IO + _sample(["NOPE"], batch=""))
    report = validate(tmp_path)
    assert not errors(report, "m")


def test_model_warmup_needs_model_file_when_python_model_autocompletes_inputs(tmp_path: Path) -> None:
    autocomplete_py = (
        "class TritonPythonModel:\n"
        "    def auto_complete_config(auto_complete_model_config):\n"
        "        return auto_complete_model_config\n\n"
        "    def execute(self, requests):\n"
        "        return []\n"
    )
    # auto_complete_config may add inputs, so the count is not decidable offline ...
    python_model(tmp_path / "auto", "m", IO + _sample(["NOPE"]), max_batch_size=8, files={"1/model.py": autocomplete_py})
    assert not errors(validate(tmp_path / "auto"), "m")
    # ... unless auto-complete is off, or the model.py has no auto_complete_config.
    assert errors(validate(tmp_path / "auto", strict=True), "m")
    python_model(tmp_path / "plain", "m", IO + _sample(["NOPE"]), max_batch_size=8)
    assert errors(validate(tmp_path / "plain"), "m")


METRIC = 'metric_identifier { family: "nv_inference_first_response_histogram_ms" }'


@pytest.mark.parametrize(
    ("control", "message"),
    [
        ("histogram_options { buckets: [ 1 ] }", "metric control must specify 'metric_identifier'"),
        (
            'metric_identifier { family: "" } histogram_options { buckets: [ 1 ] }',
            "metric identifier must specify non-empty 'family'",
        ),
        (METRIC, "metric control must specify 'histogram_options'"),
        (METRIC + " histogram_options { }", "histogram options must specify non-empty 'buckets'"),
    ],
)
def test_model_metrics_fail_with_triton_text_when_incomplete(
    tmp_path: Path, control: str, message: str
) -> None:
    python_model(tmp_path, "m", IO + f"model_metrics {{ metric_control [ {{ {control} }} ] }}\n")
    assert [d.message for d in found(validate(tmp_path), "RB209")] == [message]


def test_model_metrics_pass_when_histogram_has_buckets(tmp_path: Path) -> None:
    python_model(
        tmp_path,
        "m",
        IO
        + f"model_metrics {{ metric_control [ {{ {METRIC} histogram_options {{ buckets: [ 1, 10 ] }} }} ] }}\n",
    )
    assert not found(validate(tmp_path), "RB209")
