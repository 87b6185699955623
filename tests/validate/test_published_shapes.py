"""Shapes seen in repositories others publish, each judged as the backend's source does (issue 12).

Every repository here is a small one of our own, written to the shape the published one had: the
verdict must match what Triton 2.51 does with it (the backend sources are cited in
analysis/backends.py and docs/backends.md).
"""

from __future__ import annotations

from pathlib import Path

from support.rule_repo_helpers import MODEL_PY, validate, write_model

from repo_builder.validate.records import Severity

OV_IO = """\
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
OV_FILES = {"1/model.xml": "<net/>", "1/model.bin": b"weights"}


def codes(report: object) -> set[str]:
    return {d.code for d in report.diagnostics}


def _errors(report: object, code: str) -> list[object]:
    return [d for d in report.diagnostics if d.code == code and d.severity == Severity.ERROR]


def test_openvino_model_passes_when_it_has_no_instance_group(tmp_path: Path) -> None:
    # openvino.cc prefers KIND_CPU (TRITONBACKEND_GetBackendAttribute): the default group is CPU.
    write_model(tmp_path, "ov", f'name: "ov"\nbackend: "openvino"\n{OV_IO}', OV_FILES)
    assert validate(tmp_path).ok
    assert validate(tmp_path, gpu_present=False).ok


def test_openvino_model_is_refused_when_its_instance_group_is_kind_gpu(tmp_path: Path) -> None:
    write_model(
        tmp_path, "ov", f'name: "ov"\nbackend: "openvino"\n{OV_IO}instance_group [ {{ kind: KIND_GPU }} ]\n', OV_FILES
    )
    errors = _errors(validate(tmp_path), "RB306")
    assert errors and "openVINO backend supports only CPU device" in errors[0].message


def test_openvino_model_is_refused_when_kind_auto_becomes_gpu_on_a_gpu_target(tmp_path: Path) -> None:
    # An explicit group without a kind is KIND_AUTO; core turns it into KIND_GPU on a GPU server.
    write_model(tmp_path, "ov", f'name: "ov"\nbackend: "openvino"\n{OV_IO}instance_group [ {{ count: 2 }} ]\n', OV_FILES)
    assert _errors(validate(tmp_path), "RB306")
    assert validate(tmp_path, gpu_present=False).ok  # KIND_AUTO is KIND_CPU without GPUs


def test_openvino_model_passes_when_its_instance_group_is_kind_cpu(tmp_path: Path) -> None:
    write_model(
        tmp_path, "ov", f'name: "ov"\nbackend: "openvino"\n{OV_IO}instance_group [ {{ kind: KIND_CPU }} ]\n', OV_FILES
    )
    assert validate(tmp_path).ok


def test_openvino_declared_input_is_refused_when_it_has_no_dims(tmp_path: Path) -> None:
    # openvino.cc AutoCompleteInputOrOutput fills inputs only when the config declares none.
    body = 'input [ { name: "x" data_type: TYPE_FP32 } ]\n'
    write_model(tmp_path, "ov", f'name: "ov"\nbackend: "openvino"\n{body}', OV_FILES)
    errors = _errors(validate(tmp_path), "RB202")
    assert errors and "must specify 'dims'" in errors[0].message


def test_openvino_model_passes_when_it_declares_no_io(tmp_path: Path) -> None:
    write_model(tmp_path, "ov", 'name: "ov"\nbackend: "openvino"\n', OV_FILES)
    assert validate(tmp_path).ok


def test_openvino_onnx_file_passes_when_no_bin_file_is_beside_it(tmp_path: Path) -> None:
    # OpenVINO reads ONNX directly; only an IR model.xml needs its .bin weights.
    config = f'name: "ov"\nbackend: "openvino"\ndefault_model_filename: "model.onnx"\n{OV_IO}'
    write_model(tmp_path, "ov", config, {"1/model.onnx": b"onnx"})
    assert "RB405" not in codes(validate(tmp_path))


def test_onnx_declared_input_is_refused_when_it_has_no_dims_and_outputs_are_left_to_autofill(tmp_path: Path) -> None:
    # onnxruntime.cc: with an input declared, AutoCompleteIO("input") is skipped (input_cnt != 0).
    body = 'platform: "onnxruntime_onnx"\ninput [ { name: "x" data_type: TYPE_FP32 } ]\n'
    write_model(tmp_path, "m", f'name: "m"\n{body}', {"1/model.onnx": b"onnx"})
    assert _errors(validate(tmp_path), "RB202")


def test_graphdef_input_is_refused_when_it_has_no_dims(tmp_path: Path) -> None:
    # tensorflow.cc AutoCompleteConfig: "Nothing to be filled for graphdef".
    body = 'platform: "tensorflow_graphdef"\ninput [ { name: "x" data_type: TYPE_FP32 } ]\n'
    write_model(tmp_path, "m", f'name: "m"\n{body}', {"1/model.graphdef": b"graph"})
    assert _errors(validate(tmp_path), "RB202")


def test_tensorrt_model_is_refused_on_a_cpu_target_when_it_has_no_instance_group(tmp_path: Path) -> None:
    write_model(tmp_path, "m", 'name: "m"\nplatform: "tensorrt_plan"\n', {"1/model.plan": b"plan"})
    assert _errors(validate(tmp_path, gpu_present=False), "RB306")


def test_dali_model_passes_when_it_ships_dali_py_instead_of_model_dali(tmp_path: Path) -> None:
    write_model(tmp_path, "pre", 'name: "pre"\nbackend: "dali"\nmax_batch_size: 8\n', {"1/dali.py": "import nvidia.dali\n"})
    assert "RB405" not in codes(validate(tmp_path))


PT_IO = """\
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def test_pytorch_python_runtime_passes_when_its_version_folder_holds_model_py_only(tmp_path: Path) -> None:
    # core model_config_utils.cc leaves default_model_filename empty for runtime "model.py"; the
    # PyTorch backend's own model.py (_get_model_path) then loads model.py, else model.pt.
    config = f'name: "m"\nbackend: "pytorch"\nruntime: "model.py"\n{PT_IO}'
    write_model(tmp_path, "m", config, {"1/model.py": "import torch\n"})
    assert "RB405" not in codes(validate(tmp_path))


def test_pytorch_python_runtime_is_refused_when_its_version_folder_holds_neither_file(tmp_path: Path) -> None:
    config = f'name: "m"\nbackend: "pytorch"\nruntime: "model.py"\n{PT_IO}'
    write_model(tmp_path, "m", config, {"1/README": "weights are downloaded"})
    errors = _errors(validate(tmp_path), "RB405")
    assert errors and "model.py" in errors[0].message and "model.pt" in (errors[0].hint or "")


FIL_IO = """\
max_batch_size: 32
input [ { name: "input__0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "output__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
"""


def _fil(model_type: str | None) -> str:
    param = f'parameters [ {{ key: "model_type" value: {{ string_value: "{model_type}" }} }} ]\n' if model_type else ""
    return f'name: "fil"\nbackend: "fil"\n{FIL_IO}{param}'


def test_fil_model_passes_when_its_file_matches_model_type(tmp_path: Path) -> None:
    # fil_backend src/model.h model_file(): xgboost_json reads <version>/xgboost.json.
    write_model(tmp_path, "fil", _fil("xgboost_json"), {"1/xgboost.json": "{}"})
    assert validate(tmp_path).ok


def test_fil_model_is_refused_when_the_file_of_its_model_type_is_missing(tmp_path: Path) -> None:
    write_model(tmp_path, "fil", _fil("lightgbm"), {"1/xgboost.json": "{}"})
    errors = _errors(validate(tmp_path), "RB405")
    assert errors and "model.txt" in errors[0].message


def test_fil_model_reads_xgboost_model_when_model_type_is_not_set(tmp_path: Path) -> None:
    # fil_backend src/shared_state.h: model_type defaults to "xgboost" (xgboost.model).
    write_model(tmp_path, "fil", _fil(None), {"1/xgboost.model": b"binary"})
    assert validate(tmp_path).ok


def test_tensorrt_model_is_refused_on_a_cpu_target_when_it_has_no_config(tmp_path: Path) -> None:
    # No config.pbtxt: auto-complete gives one KIND_AUTO group, KIND_CPU without GPUs, which the
    # TensorRT backend refuses (tensorrt_backend src/instance_state.cc).
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "1" / "model.plan").write_bytes(b"plan")
    assert _errors(validate(tmp_path, gpu_present=False), "RB306")
    assert validate(tmp_path).ok


def test_vllm_model_is_refused_when_its_version_folder_has_no_model_json(tmp_path: Path) -> None:
    # vllm_backend src/model.py init_engine: asserts <version folder>/model.json exists.
    write_model(tmp_path, "llm", 'backend: "vllm"\ninstance_group [ { kind: KIND_MODEL } ]\n', {"1/README": "see docs"})
    errors = _errors(validate(tmp_path), "RB405")
    assert errors and "model.json" in errors[0].message


def test_vllm_model_passes_when_model_json_is_in_its_version_folder(tmp_path: Path) -> None:
    write_model(tmp_path, "llm", 'backend: "vllm"\ninstance_group [ { kind: KIND_MODEL } ]\n', {"1/model.json": "{}"})
    assert validate(tmp_path).ok


def test_model_folder_passes_fail_on_warning_when_it_keeps_an_assets_folder_beside_its_versions(tmp_path: Path) -> None:
    # Triton only logs "ignore version directory 'tokenizer' ..." and loads version 1.
    write_model(tmp_path, "pre", 'name: "pre"\nbackend: "python"\n', {"1/model.py": MODEL_PY, "tokenizer/vocab.txt": "a"})
    report = validate(tmp_path)
    found = [d for d in report.diagnostics if d.code == "RB107"]
    assert found and all(d.severity == Severity.INFO for d in found)


def test_version_folder_ignored_stays_a_warning_when_its_name_looks_like_a_version(tmp_path: Path) -> None:
    write_model(tmp_path, "pre", 'name: "pre"\nbackend: "python"\n', {"1/model.py": MODEL_PY, "v2/model.py": MODEL_PY})
    found = [d for d in validate(tmp_path).diagnostics if d.code == "RB107"]
    assert found and found[0].severity == Severity.WARNING


def test_tensorrt_model_is_refused_when_its_instance_group_is_kind_model(tmp_path: Path) -> None:
    # tensorrt_backend src/instance_state.cc: any kind but KIND_GPU is refused.
    config = 'name: "m"\nplatform: "tensorrt_plan"\ninstance_group [ { kind: KIND_MODEL } ]\n'
    write_model(tmp_path, "m", config, {"1/model.plan": b"plan"})
    errors = _errors(validate(tmp_path), "RB306")
    assert errors and "TensorRT backend supports only GPU device" in errors[0].message


def test_pytorch_model_passes_when_its_instance_group_is_kind_model(tmp_path: Path) -> None:
    config = f'name: "m"\nplatform: "pytorch_libtorch"\n{PT_IO}instance_group [ {{ kind: KIND_MODEL }} ]\n'
    write_model(tmp_path, "m", config, {"1/model.pt": b"pt"})
    assert validate(tmp_path).ok
