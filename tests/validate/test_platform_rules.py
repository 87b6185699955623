"""RB4xx: platform/backend and model files, each rule with a repository that breaks it and one that does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.validate_repo_helpers import (
    ADD_SUB_MODEL_PY,
    codes,
    make_add_sub,
    make_model,
    messages,
    onnx_bytes,
    validate,
)

from repo_builder.validate.analysis.python_source import check_python_source
from repo_builder.validate.analysis.resolve import ResolvedBackend, resolve_backend
from repo_builder.validate.records import Severity
from repo_builder.validate.scan import scan_repository

IO = """max_batch_size: 0
input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]
"""
ONNX = onnx_bytes([("x", "FLOAT", [4])], [("y", "FLOAT", [4])])


def _resolved(repo: Path, name: str) -> ResolvedBackend:
    return resolve_backend(next(m for m in scan_repository(repo).models if m.name == name))


@pytest.mark.parametrize(
    ("files", "backend", "platform"),
    [
        ({"model.plan": b"x"}, "tensorrt", "tensorrt_plan"),
        ({"model.onnx": ONNX}, "onnxruntime", "onnxruntime_onnx"),
        ({"model.onnx": {"model.onnx": ONNX}}, "onnxruntime", "onnxruntime_onnx"),
        ({"model.pt": b"x"}, "pytorch", "pytorch_libtorch"),
        ({"model.pt2": b"x"}, "pytorch", "torch_aoti"),
        ({"model.savedmodel": {"saved_model.pb": b"x"}}, "tensorflow", "tensorflow_savedmodel"),
        ({"model.graphdef": b"x"}, "tensorflow", "tensorflow_graphdef"),
        ({"model.xml": "<net/>", "model.bin": b"x"}, "openvino", ""),
        ({"model.py": ADD_SUB_MODEL_PY}, "python", ""),
    ],
)
def test_resolve_backend_detects_backend_when_config_omits_it(
    repo: Path, files: dict, backend: str, platform: str
) -> None:
    make_model(repo, "m", IO, {1: files})
    resolved = _resolved(repo, "m")
    assert (resolved.backend, resolved.platform) == (backend, platform)
    assert resolved.detected_from is not None and resolved.detected_from.startswith("1/")


def test_resolve_backend_takes_custom_backend_from_model_name_when_nothing_else(repo: Path) -> None:
    make_model(repo, "m.identity", None, {1: {}})
    resolved = _resolved(repo, "m.identity")
    assert (resolved.backend, resolved.default_model_filename) == ("identity", "model.identity")


def test_backend_undetermined_flagged_with_triton_message_when_version_empty(repo: Path) -> None:
    make_model(repo, "no_version", 'name: "no_version"\n' + IO, versions={})
    report = validate(repo)
    assert messages(report, "RB401") == [
        "Invalid model name: Could not determine backend for model 'no_version' with no backend in model "
        "configuration. Expected model name of the form 'model.<backend_name>'."
    ]
    hint = next(d.hint for d in report.diagnostics if d.code == "RB401")
    assert hint and hint.startswith("needs the model file")


def test_backend_undetermined_flagged_when_only_a_later_folder_has_the_file(repo: Path) -> None:
    # Triton inspects only the first subfolder by name ("1"), not "2" where the file is.
    make_model(repo, "m", IO, {1: {}, 2: {"model.onnx": ONNX}})
    report = validate(repo)
    assert "RB401" in codes(report, "m", Severity.ERROR)
    hint = next(d.hint for d in report.diagnostics if d.code == "RB401")
    assert hint and "'1/'" in hint


def test_backend_undetermined_silent_when_first_folder_has_model_file(repo: Path) -> None:
    make_model(repo, "m", IO, {1: {"model.onnx": ONNX}})
    report = validate(repo)
    assert "RB401" not in codes(report)
    assert report.ok


def test_platform_unknown_flagged_with_triton_message(repo: Path) -> None:
    make_model(repo, "m", 'platform: "onnx"\n' + IO, {1: {"model.onnx": ONNX}})
    assert messages(validate(repo), "RB402") == ["unexpected platform type 'onnx' for m"]


def test_platform_unknown_silent_for_known_platform_and_ensemble(repo: Path) -> None:
    make_model(repo, "m", 'platform: "onnxruntime_onnx"\n' + IO, {1: {"model.onnx": ONNX}})
    assert "RB402" not in codes(validate(repo))


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            'platform: "tensorrt_plan"\nbackend: "onnxruntime"\n',
            "unexpected 'platform' and 'backend' pair, got:tensorrt_plan, onnxruntime",
        ),
        # Triton's own special_cases/invalid_platform: a misspelt platform with the ONNX file name.
        (
            'platform: "onnxruntim"\ndefault_model_filename: "model.onnx"\n',
            "unexpected 'platform' and 'backend' pair, got:onnxruntim, onnxruntime",
        ),
        (
            'platform: "ensemble"\nbackend: "python"\n',
            "Ensemble model 'm' must have platform type 'ensemble' and empty backend type",
        ),
    ],
)
def test_platform_backend_mismatch_flagged_with_triton_message(
    repo: Path, config: str, expected: str
) -> None:
    make_model(repo, "m", config + IO, {1: {"model.onnx": ONNX}})
    assert expected in messages(validate(repo), "RB403")


@pytest.mark.parametrize(
    "config",
    ['platform: "onnxruntime_onnx"\nbackend: "onnxruntime"\n', 'platform: "whatever"\nbackend: "python"\n'],
)
def test_platform_backend_mismatch_silent_when_pair_agrees(repo: Path, config: str) -> None:
    make_model(repo, "m", config + IO, {1: {"model.onnx": ONNX, "model.py": ADD_SUB_MODEL_PY}})
    assert "RB403" not in codes(validate(repo))


def test_backend_not_standard_warned_for_custom_backend_in_config(repo: Path) -> None:
    make_model(repo, "m", 'backend: "my_custom"\n' + IO, {1: {}})
    report = validate(repo)
    assert "RB404" in codes(report, "m", Severity.WARNING)
    assert report.ok


def test_backend_not_standard_is_error_when_taken_from_model_name(repo: Path) -> None:
    make_model(repo, "unknown_backend.unknown", None, {1: {}})
    report = validate(repo)
    assert messages(report, "RB404") == [
        "unable to find backend library for backend 'unknown', try specifying runtime on the model configuration."
    ]
    assert "RB404" in codes(report, severity=Severity.ERROR)


def test_backend_not_standard_silent_for_python(repo: Path) -> None:
    make_add_sub(repo)
    assert "RB404" not in codes(validate(repo))


def test_model_file_missing_flagged_for_python_with_hang_hint(repo: Path) -> None:
    make_model(repo, "m", 'backend: "python"\n' + IO, {1: {}})
    report = validate(repo)
    assert "RB405" in codes(report, "m", Severity.ERROR)
    diag = next(d for d in report.diagnostics if d.code == "RB405")
    assert diag.path == "m/1/model.py" and diag.version == 1
    assert diag.hint and "2.51" in diag.hint and "time" in diag.hint


@pytest.mark.parametrize(
    ("config", "files"),
    [
        ('backend: "onnxruntime"\n', {"model.onnx": {"weights.bin": b"x"}}),  # folder without model.onnx
        ('platform: "tensorrt_plan"\n', {"model.plan": {}}),  # a folder, not a file
        ('backend: "openvino"\n', {"model.xml": "<net/>"}),  # no model.bin beside it
        ('platform: "tensorflow_savedmodel"\n', {"model.savedmodel": b"x"}),  # must be a folder
        ('backend: "python"\ndefault_model_filename: "main.py"\n', {"model.py": ADD_SUB_MODEL_PY}),
        ('platform: "pytorch_libtorch"\n', {"model.pt2": b"x"}),
    ],
)
def test_model_file_missing_flagged_when_file_wrong_or_absent(repo: Path, config: str, files: dict) -> None:
    make_model(repo, "m", config + IO, {1: files})
    assert "RB405" in codes(validate(repo), "m")


@pytest.mark.parametrize(
    ("config", "files"),
    [
        ('backend: "onnxruntime"\n', {"model.onnx": {"model.onnx": ONNX}}),
        ('backend: "openvino"\n', {"model.xml": "<net/>", "model.bin": b"x"}),
        ('platform: "tensorflow_savedmodel"\n', {"model.savedmodel": {"saved_model.pb": b"x"}}),
        ('backend: "python"\ndefault_model_filename: "main.py"\n', {"main.py": ADD_SUB_MODEL_PY}),
        ('platform: "pytorch_libtorch"\n', {"model.pt": b"x"}),
        ('backend: "dali"\n', {"model.dali": b"x"}),
    ],
)
def test_model_file_missing_silent_when_file_present(repo: Path, config: str, files: dict) -> None:
    make_model(repo, "m", config + IO, {1: files})
    assert "RB405" not in codes(validate(repo))


def test_model_file_missing_checks_only_versions_the_policy_loads(repo: Path) -> None:
    make_model(repo, "m", 'backend: "python"\n' + IO, {1: {}, 2: {"model.py": ADD_SUB_MODEL_PY}})
    assert "RB405" not in codes(validate(repo))  # latest = 2; version 1 never loads


def test_model_file_missing_is_warning_when_cc_model_filenames_cover_gpus(repo: Path) -> None:
    config = 'backend: "onnxruntime"\ncc_model_filenames { key: "8.6" value: "model_86.onnx" }\n' + IO
    make_model(repo, "m", config, {1: {"model_86.onnx": ONNX}})
    report = validate(repo)
    assert "RB405" in codes(report, "m", Severity.WARNING)
    assert "RB405" not in codes(report, "m", Severity.ERROR)


def test_model_file_missing_defers_to_pending_rule_when_compile_recipe_present(repo: Path) -> None:
    make_model(repo, "m", 'platform: "tensorrt_plan"\n' + IO, {1: {"compile.json": "{}"}})
    assert "RB405" not in codes(validate(repo))


def test_cc_model_filenames_invalid_flagged_for_sm_key_and_missing_file(repo: Path) -> None:
    config = 'backend: "onnxruntime"\ncc_model_filenames { key: "sm_86" value: "model_86.onnx" }\n' + IO
    make_model(repo, "m", config, {1: {"model.onnx": ONNX}})
    found = messages(validate(repo), "RB406")
    assert any("key 'sm_86' is not a compute capability" in m for m in found)
    assert any("model_86.onnx" in m and "is missing" in m for m in found)


def test_cc_model_filenames_invalid_silent_when_key_and_file_good(repo: Path) -> None:
    config = 'backend: "onnxruntime"\ncc_model_filenames { key: "8.6" value: "model_86.onnx" }\n' + IO
    make_model(repo, "m", config, {1: {"model.onnx": ONNX, "model_86.onnx": ONNX}})
    assert "RB406" not in codes(validate(repo))


def test_python_model_invalid_flagged_with_line_when_syntax_error(repo: Path) -> None:
    make_model(
        repo, "m", 'backend: "python"\n' + IO, {1: {"model.py": "import os\n\ndef broken(:\n    pass\n"}}
    )
    report = validate(repo)
    diag = next(d for d in report.diagnostics if d.code == "RB407")
    assert diag.severity == Severity.ERROR and diag.line == 3
    assert "does not parse" in diag.message


def test_python_model_invalid_flagged_when_class_misnamed(repo: Path) -> None:
    source = ADD_SUB_MODEL_PY.replace("class TritonPythonModel", "class Model")
    make_model(repo, "m", 'backend: "python"\n' + IO, {1: {"model.py": source}})
    assert any("TritonPythonModel" in m for m in messages(validate(repo), "RB407"))


def test_python_model_invalid_never_imports_the_file(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    source = f"open({str(marker)!r}, 'w').close()\n" + ADD_SUB_MODEL_PY
    make_model(repo, "m", 'backend: "python"\n' + IO, {1: {"model.py": source}})
    assert "RB407" not in codes(validate(repo))
    assert not marker.exists()


@pytest.mark.parametrize(
    "source",
    [
        ADD_SUB_MODEL_PY,
        "from mypackage.model import TritonPythonModel\n",
        "from mypackage.model import *\n",
        "try:\n    import torch\nexcept ImportError:\n    torch = None\n\nclass TritonPythonModel:\n    def execute(self, r):\n        return []\n",
    ],
)
def test_python_model_invalid_silent_when_class_defined_or_imported(source: str) -> None:
    assert check_python_source(source.encode(), "model.py") == []


def test_python_model_invalid_errs_when_execute_missing() -> None:
    # An error, as the rule's severity in docs/rules.md says: every request to the model would fail.
    problems = check_python_source(
        b"class TritonPythonModel:\n    def initialize(self, args):\n        pass\n", "model.py"
    )
    assert [(p[3], p[1]) for p in problems] == [(Severity.ERROR, 1)]


def test_python_model_invalid_flagged_when_source_has_null_bytes() -> None:
    problems = check_python_source(b"class TritonPythonModel:\x00\n", "model.py")
    assert problems and problems[0][3] == Severity.ERROR


def test_platform_rules_silent_under_strict_when_config_missing(repo: Path) -> None:
    # Under --strict Triton refuses the missing config first (RB105); nothing is detected from files.
    make_model(repo, "m", None, {1: {}})
    report = validate(repo, strict=True)
    assert "RB105" in codes(report, "m", Severity.ERROR)
    assert {"RB401", "RB405"}.isdisjoint(codes(report, "m"))


def test_backend_undetermined_flagged_when_ipynb_checkpoints_sorts_before_version_folder(repo: Path) -> None:
    # '.' sorts before digits: Triton inspects '.ipynb_checkpoints/' and finds no model file there.
    make_model(repo, "m", IO, {1: {"model.onnx": ONNX}, ".ipynb_checkpoints": {"model-checkpoint.onnx": ONNX}})
    report = validate(repo)
    assert "RB401" in codes(report, "m", Severity.ERROR)
    assert "'.ipynb_checkpoints/'" in next(d.hint for d in report.diagnostics if d.code == "RB401")
