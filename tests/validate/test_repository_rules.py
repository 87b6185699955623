"""The repository as a whole (RB001), repo-builder's manifest (RB002), versions that disagree (RB111),
and what a report states: the deploy target, each model's resolved platform, lines and columns."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support.validate_repo_helpers import (
    ADD_SUB_MODEL_PY,
    codes,
    make_add_sub,
    make_model,
    messages,
    onnx_bytes,
    onnx_config,
    validate,
)

from repo_builder.validate.records import CPU_TARGET, GPU_TARGET, Severity


def test_not_a_model_repository_refused_with_hint_when_given_a_model_folder(repo: Path) -> None:
    model = make_add_sub(repo)
    report = validate(model)
    [d] = report.diagnostics  # its version folders are not judged as models: one diagnostic, not a cascade
    assert d.severity == Severity.ERROR and d.model is None
    assert "pass its parent" in (d.hint or "")


def test_not_a_model_repository_refused_when_folder_is_empty(tmp_path: Path) -> None:
    report = validate(tmp_path)
    assert "RB001" in codes(report, None, Severity.ERROR) and not report.ok


def test_not_a_model_repository_refused_when_given_an_export_folder(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(onnx_bytes([("x", 1, [1])], [("y", 1, [1])]))
    (tmp_path / "signature.json").write_text("{}")
    assert any("export folder" in m for m in messages(validate(tmp_path), "RB001"))


def test_not_a_model_repository_silent_when_given_a_repository(repo: Path) -> None:
    make_add_sub(repo)
    assert "RB001" not in codes(validate(repo))


def _manifest(repo: Path, files: dict[str, bytes]) -> None:
    record = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    data = {"format": 1, "models": {"add_sub": {"versions": {"1": {"files": record}}}}}
    (repo / "repo-builder.json").write_text(json.dumps(data))


def test_built_file_changed_reports_missing_and_changed_files(repo: Path) -> None:
    make_add_sub(repo)
    _manifest(repo, {"model.py": ADD_SUB_MODEL_PY.encode(), "labels.txt": b"a\nb\n"})
    report = validate(repo)
    assert "RB002" not in codes(report, "add_sub", Severity.WARNING)
    assert any("labels.txt' changed since build: missing" in m for m in messages(report, "RB002"))
    (repo / "add_sub" / "1" / "model.py").write_text(ADD_SUB_MODEL_PY + "# edited\n")
    assert any("changed since" in m for m in messages(validate(repo), "RB002"))


def test_built_file_changed_silent_when_files_match_manifest(repo: Path) -> None:
    make_add_sub(repo)
    _manifest(repo, {"model.py": ADD_SUB_MODEL_PY.encode()})
    assert "RB002" not in codes(validate(repo))


def test_built_file_changed_refuses_manifest_paths_outside_the_model(repo: Path) -> None:
    make_add_sub(repo)
    _manifest(repo, {"../../../etc/passwd": b"x"})
    assert any("outside the model folder" in m for m in messages(validate(repo), "RB002"))


def _onnx_model(repo: Path, versions: dict[int, int], policy: str = "") -> None:
    config = onnx_config("m", 0, [("x", "TYPE_FP32", [4])], [("y", "TYPE_FP32", [10])], extra=policy)
    make_model(
        repo, "m", config, {v: {"model.onnx": onnx_bytes([("x", 1, [4])], [("y", 1, [n])])} for v, n in versions.items()}
    )


def test_versions_disagree_warns_when_an_older_version_does_not_fit_the_shared_config(repo: Path) -> None:
    _onnx_model(repo, {1: 5, 2: 10})
    report = validate(repo)
    assert codes(report, "m", Severity.WARNING) >= {"RB111"}
    assert report.ok  # version 1 does not load today: a warning, not a refusal
    [d] = [d for d in report.diagnostics if d.code == "RB111"]
    assert d.version == 1


def test_versions_disagree_silent_when_every_version_fits(repo: Path) -> None:
    _onnx_model(repo, {1: 10, 2: 10})
    assert "RB111" not in codes(validate(repo))


def test_report_states_the_deploy_target(repo: Path) -> None:
    make_add_sub(repo)
    assert validate(repo).target == GPU_TARGET  # by default, whatever machine validate runs on
    assert validate(repo, gpu_present=False).target == CPU_TARGET


def test_instance_group_devices_refuses_tensorrt_default_group_on_cpu_target(repo: Path) -> None:
    make_model(repo, "plan", 'platform: "tensorrt_plan"\nmax_batch_size: 0\n', {1: {"model.plan": b"x"}})
    cpu = [d for d in validate(repo, gpu_present=False).diagnostics if d.code == "RB306"]
    assert cpu and "TensorRT backend supports only GPU device" in cpu[0].message
    assert "RB306" not in codes(validate(repo))  # the default target has GPUs


def test_model_summary_shows_platform_resolved_from_files(repo: Path) -> None:
    make_model(repo, "auto", None, {1: {"model.onnx": onnx_bytes([("x", 1, [-1, 4])], [("y", 1, [-1, 4])])}})
    [summary] = validate(repo).models
    assert summary.platform == "onnxruntime_onnx"


def test_model_file_missing_silent_when_dali_falls_back_to_dali_py(repo: Path) -> None:
    make_model(repo, "pre", 'backend: "dali"\nmax_batch_size: 8\n', {1: {"dali.py": "pipe = None\n"}})
    assert "RB405" not in codes(validate(repo))
    make_model(repo, "empty", 'backend: "dali"\nmax_batch_size: 8\n', {1: {}})
    assert any("dali.py" in (d.hint or "") for d in validate(repo).diagnostics if d.code == "RB405")


@pytest.mark.parametrize("strict", [False, True])
def test_config_missing_hints_where_config_belongs_when_it_sits_in_a_version_folder(repo: Path, strict: bool) -> None:
    make_model(repo, "m", None, {1: {"model.py": ADD_SUB_MODEL_PY, "config.pbtxt": 'backend: "python"\n'}})
    hints = [d.hint or "" for d in validate(repo, strict=strict).diagnostics if d.code == "RB105"]
    assert hints and "belongs in the model folder, not the version folder" in hints[0]


def test_diagnostics_point_at_the_config_line_of_their_field(repo: Path) -> None:
    make_model(repo, "m", 'name: "m"\nbackend: "python"\n\nmax_batch_size: -2\n', {1: {"model.py": ADD_SUB_MODEL_PY}})
    [d] = [d for d in validate(repo).diagnostics if d.code == "RB301"]
    assert (d.line, d.column) == (4, 1)


def _postprocess(repo: Path, labels: dict[int, int]) -> None:
    config = (
        'name: "post"\nbackend: "python"\nmax_batch_size: 8\n'
        'input [ { name: "LOGITS" data_type: TYPE_FP32 dims: [ 10 ] } ]\n'
        'output [ { name: "LABELS" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
    )
    versions = {v: {"model.py": ADD_SUB_MODEL_PY, "labels.txt": "".join(f"l{i}\n" for i in range(n))} for v, n in labels.items()}
    make_model(repo, "post", config, versions)
    (repo / "repo-builder.json").write_text(json.dumps({"format": 1, "models": {"post": {"role": "postprocess"}}}))


def test_versions_disagree_warns_when_a_version_has_another_labels_count(repo: Path) -> None:
    _postprocess(repo, {1: 5, 2: 10})
    found = [d for d in validate(repo).diagnostics if d.code == "RB111"]
    assert [d.version for d in found] == [1] and "5 labels" in found[0].message


def test_versions_disagree_silent_when_labels_fit_every_version(repo: Path) -> None:
    _postprocess(repo, {1: 10, 2: 10})
    assert "RB111" not in codes(validate(repo))
