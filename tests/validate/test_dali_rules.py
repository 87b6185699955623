"""DALI backend rules (RB411-RB413), judged as dali_backend's source does, on repositories shaped after its own
QA repositories (qa/L0_config_validation: two inputs DALI_INPUT_0/1, two outputs, the invalid file names) and
its resnet50 example; the pipelines are serialized here with DALI, validate only reads their bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.rule_repo_helpers import validate, write_model

from repo_builder.validate.analysis.dali_pipeline import NotAPipeline, read_dali_pipeline
from repo_builder.validate.records import Severity

dali = pytest.importorskip("nvidia.dali", reason="needs the dali extra (nvidia-dali-cuda120) to serialize test pipelines")

QA_IO = """\
input [ { name: "DALI_INPUT_0" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
input [ { name: "DALI_INPUT_1" data_type: TYPE_FP16 dims: [ -1 ] allow_ragged_batch: true } ]
output [ { name: "DALI_OUTPUT_0" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""
SECOND_OUTPUT = 'output [ { name: "DALI_OUTPUT_1" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
KIND_CPU = "instance_group [ { count: 1 kind: KIND_CPU } ]\n"


def qa_pipeline(gpu: bool = False) -> bytes:
    """qa/L0_config_validation's pipeline: two external sources, two outputs (on the GPU in its gpu flavour)."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=256, num_threads=1, device_id=None)  # type: ignore[misc]
    def pipe():  # type: ignore[no-untyped-def]
        first = fn.external_source(device="cpu", name="DALI_INPUT_0", dtype=types.FLOAT)
        second = fn.external_source(device="cpu", name="DALI_INPUT_1", dtype=types.FLOAT16)
        if gpu:
            first, second = first.gpu(), second.gpu()
        return first / 3, fn.cast(second, dtype=types.FLOAT) / 2

    return bytes(pipe().serialize())


def config(name: str, body: str = QA_IO + SECOND_OUTPUT, extra: str = "") -> str:
    return f'name: "{name}"\nbackend: "dali"\nmax_batch_size: 32\n{extra}{body}'


def errors(report: object, code: str) -> list[object]:
    return [d for d in report.diagnostics if d.code == code and d.severity == Severity.ERROR]


def test_dali_pipeline_reader_lists_inputs_outputs_and_devices_when_given_a_serialized_pipeline() -> None:
    cpu, gpu = read_dali_pipeline(qa_pipeline()), read_dali_pipeline(qa_pipeline(gpu=True))
    assert cpu.batch_size == 256 and cpu.inputs == ("DALI_INPUT_0", "DALI_INPUT_1") and len(cpu.outputs) == 2
    assert set(cpu.output_devices) == {"cpu"} and set(gpu.output_devices) == {"gpu"}
    with pytest.raises(NotAPipeline):
        read_dali_pipeline(b"import nvidia.dali as dali\n@autoserialize\n")


def test_dali_model_passes_when_config_matches_its_pipeline(tmp_path: Path) -> None:
    write_model(tmp_path, "model3_cpu_valid", config("model3_cpu_valid", extra=KIND_CPU), {"1/model.dali": qa_pipeline()})
    report = validate(tmp_path, strict=True)
    assert not [d for d in report.diagnostics if d.code.startswith("RB41")], report.diagnostics


def test_dali_filename_is_refused_when_it_holds_a_character_the_backend_rejects(tmp_path: Path) -> None:
    # qa/L0_config_validation model5 and model6: the backend refuses before looking for the file.
    for name, filename, char in (("model5", "test');import os;os.system('echo inavlid", "'"), ("model6", "../../tmp/model.dali", "/")):
        write_model(tmp_path, name, config(name, extra=f'default_model_filename: "{filename}"\n'), {"1/dali.py": "pipe = None\n"})
        found = [d for d in errors(validate(tmp_path), "RB411") if d.model == name]
        assert found and f"contains an invalid character: '{char}'" in found[0].message


def test_dali_filename_passes_when_it_uses_allowed_characters(tmp_path: Path) -> None:
    write_model(tmp_path, "m", config("m", extra='default_model_filename: "my_pipe-1.dali"\n'), {"1/my_pipe-1.dali": qa_pipeline()})
    assert not errors(validate(tmp_path), "RB411")


def test_dali_io_refused_when_config_declares_an_input_the_pipeline_lacks(tmp_path: Path) -> None:
    body = QA_IO.replace("DALI_INPUT_1", "INPUT_X") + SECOND_OUTPUT
    write_model(tmp_path, "m", config("m", body), {"1/model.dali": qa_pipeline()})
    found = errors(validate(tmp_path), "RB412")
    assert found and "Configuration file contains config for INPUT_X but such input is not present in the pipeline" in found[0].message


def test_dali_io_missing_output_passes_with_auto_complete_and_is_refused_under_strict(tmp_path: Path) -> None:
    # qa model4: one config output for a two-output pipeline; AutofillOutputsConfig appends the missing one,
    # ValidateOutputs (auto-complete off) wants the counts equal.
    write_model(tmp_path, "model4", config("model4", QA_IO, KIND_CPU), {"1/model.dali": qa_pipeline()})
    assert not errors(validate(tmp_path), "RB412")
    found = errors(validate(tmp_path, strict=True), "RB412")
    assert found and "do not match (config 1, model.dali 2)" in found[0].message


def test_dali_io_refused_when_config_has_more_outputs_than_the_pipeline(tmp_path: Path) -> None:
    third = SECOND_OUTPUT.replace("DALI_OUTPUT_1", "DALI_OUTPUT_2")
    write_model(tmp_path, "m", config("m", QA_IO + SECOND_OUTPUT + third), {"1/model.dali": qa_pipeline()})
    assert errors(validate(tmp_path), "RB412")


def test_dali_io_not_judged_when_model_dali_is_an_autoserialized_script(tmp_path: Path) -> None:
    body = QA_IO.replace("DALI_INPUT_1", "INPUT_X")
    write_model(tmp_path, "m", config("m", body), {"1/model.dali": "import nvidia.dali as dali\n"})
    assert not errors(validate(tmp_path), "RB412")


def test_dali_gpu_pipeline_refused_on_a_cpu_target_and_passes_on_a_gpu_target(tmp_path: Path) -> None:
    write_model(tmp_path, "model0_gpu", config("model0_gpu"), {"1/model.dali": qa_pipeline(gpu=True)})
    write_model(tmp_path, "model3_cpu", config("model3_cpu", extra=KIND_CPU), {"1/model.dali": qa_pipeline()})
    on_cpu = errors(validate(tmp_path, gpu_present=False), "RB413")
    assert [d.model for d in on_cpu] == ["model0_gpu"] and "this target has no GPU" in on_cpu[0].message
    assert not errors(validate(tmp_path), "RB413")


def test_dali_gpu_pipeline_refused_on_kind_cpu_instances_even_on_a_gpu_target(tmp_path: Path) -> None:
    # dali_model_instance.h GetDaliDeviceId: an instance without a CUDA stream builds its pipeline CPU-only.
    write_model(tmp_path, "m", config("m", extra=KIND_CPU), {"1/model.dali": qa_pipeline(gpu=True)})
    found = errors(validate(tmp_path), "RB413")
    assert found and "its instance_group runs KIND_CPU instances" in found[0].message


def declared_pipeline() -> bytes:
    """qa/L0_config_validation's GPU pipeline's declarations: DALI_INPUT_1 is FLOAT16, both outputs 1-D, the first FLOAT."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=256, num_threads=1, device_id=None, output_dtype=[types.FLOAT, None], output_ndim=[1, 1])  # type: ignore[misc]
    def pipe():  # type: ignore[no-untyped-def]
        first = fn.external_source(device="cpu", name="DALI_INPUT_0")
        second = fn.external_source(device="cpu", name="DALI_INPUT_1", dtype=types.FLOAT16)
        return first / 3, fn.cast(second, dtype=types.FLOAT) / 2

    return bytes(pipe().serialize())


def test_dali_io_refused_when_config_data_type_differs_from_the_pipeline(tmp_path: Path) -> None:
    # qa model1_gpu_invalid_i_type: DALI_INPUT_1 declared TYPE_FP32 for a FLOAT16 external source.
    body = QA_IO.replace("TYPE_FP16", "TYPE_FP32") + SECOND_OUTPUT
    write_model(tmp_path, "model1", config("model1", body), {"1/model.dali": declared_pipeline()})
    found = errors(validate(tmp_path), "RB412")
    assert [d.message for d in found] == ['Mismatch of data_type config for "DALI_INPUT_1". Data type defined in config: TYPE_FP32, '
                                          "in the pipeline: TYPE_FP16"]


def test_dali_io_refused_when_config_dims_count_differs_from_the_pipeline_ndim(tmp_path: Path) -> None:
    # qa model2_gpu_invalid_o_ndim: DALI_OUTPUT_1 with two dims for a 1-D pipeline output.
    body = QA_IO + SECOND_OUTPUT.replace("dims: [ -1 ]", "dims: [ -1, -1 ]")
    write_model(tmp_path, "model2", config("model2", body), {"1/model.dali": declared_pipeline()})
    found = errors(validate(tmp_path), "RB412")
    assert [d.message for d in found] == ['Mismatch in number of dimensions for "DALI_OUTPUT_1". Number of dimensions defined in '
                                          "config: 2, in the pipeline: 1"]
    write_model(tmp_path, "model0", config("model0"), {"1/model.dali": declared_pipeline()})  # model0_gpu_valid
    assert not [d for d in errors(validate(tmp_path), "RB412") if d.model == "model0"]
