"""Offline validate on an untrusted repository (issue 10): nothing outside the repository is read or
printed, only regular files are read, sizes are bounded, ONNX external data stays in the model folder."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from support.validate_repo_helpers import (
    ADD_SUB_MODEL_PY,
    codes,
    make_add_sub,
    make_model,
    messages,
    onnx_config,
    validate,
)

from repo_builder.validate.records import Severity
from repo_builder.validate.scan import MAX_CONFIG_BYTES

SECRET = "ghp_SECRETtoken123"
ROOT = Path(__file__).resolve().parents[2]


def _all_text(report: object) -> str:
    return "\n".join(f"{d.message} {d.hint or ''} {d.path}" for d in report.diagnostics)


def test_symlink_leaves_repository_refused_without_leaking_when_config_links_to_a_secret(
    repo: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(f"{SECRET} is the token\n")
    model = make_add_sub(repo)
    (model / "config.pbtxt").unlink()
    (model / "config.pbtxt").symlink_to(secret)
    report = validate(repo)
    assert "RB103" in codes(report, "add_sub", Severity.ERROR)
    assert SECRET not in _all_text(report) and "secret.txt" not in _all_text(report)
    assert "RB201" not in codes(report)  # the file is never parsed, so the parser cannot quote it


def test_symlink_leaves_repository_refused_without_leaking_when_config_links_to_proc_environ(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RB_TEST_SECRET", SECRET)
    model = make_add_sub(repo)
    (model / "config.pbtxt").unlink()
    (model / "config.pbtxt").symlink_to("/proc/self/environ")
    report = validate(repo)
    assert "RB103" in codes(report, "add_sub", Severity.ERROR)
    assert SECRET not in _all_text(report) and "RB_TEST_SECRET" not in _all_text(report)


def test_symlink_leaves_repository_refused_when_model_folder_links_outside(repo: Path, tmp_path: Path) -> None:
    elsewhere = make_add_sub(tmp_path / "elsewhere", "linked")
    (elsewhere / "config.pbtxt").write_text(f'name: "{SECRET}"\n')
    (repo / "linked").symlink_to(elsewhere)
    report = validate(repo)
    assert "RB103" in codes(report, "linked", Severity.ERROR)
    assert SECRET not in _all_text(report)


def test_symlink_leaves_repository_refused_when_version_folder_links_outside(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{SECRET}.py").write_text("x = 1\n")
    model = make_add_sub(repo)
    (model / "2").symlink_to(outside)
    report = validate(repo)
    assert "RB103" in codes(report, "add_sub", Severity.ERROR)
    assert SECRET not in _all_text(report)  # the linked folder is not even listed


def test_symlink_leaves_repository_refused_when_model_py_links_to_dev_zero(repo: Path) -> None:
    model = make_add_sub(repo)
    (model / "1" / "model.py").unlink()
    (model / "1" / "model.py").symlink_to("/dev/zero")
    report = validate(repo)  # must not read /dev/zero (2.7 GB in 8 s before)
    assert "RB103" in codes(report, "add_sub", Severity.ERROR)


def _validate_in_child(repo: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        f"""
        from repo_builder.validate.engine import validate_repository
        report = validate_repository({str(repo)!r})
        print(sorted({{(d.code, d.severity.value) for d in report.diagnostics}}))
        """
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False
    )


@pytest.mark.parametrize("with_config", [True, False], ids=["config", "auto-complete"])
def test_python_model_invalid_reported_without_hanging_when_model_py_is_a_fifo(repo: Path, with_config: bool) -> None:
    model = make_add_sub(repo)
    if not with_config:
        (model / "config.pbtxt").unlink()
    (model / "1" / "model.py").unlink()
    os.mkfifo(model / "1" / "model.py")
    result = _validate_in_child(repo)  # a blocking read hung forever before: TimeoutExpired fails the test
    assert result.returncode == 0, result.stderr
    if with_config:
        assert "('RB407', 'error')" in result.stdout


def test_config_parses_when_config_is_bigger_than_the_old_limit(repo: Path) -> None:
    # Triton has no size limit of its own; a 9 MB config (long comments, inline labels) loads.
    model = make_add_sub(repo)
    text = (model / "config.pbtxt").read_text() + ("# " + "x" * 98 + "\n") * 90_000
    (model / "config.pbtxt").write_text(text)
    assert 8 << 20 < len(text) < MAX_CONFIG_BYTES
    report = validate(repo)
    assert report.ok, [d.message for d in report.diagnostics]


def _onnx_with_external(location: str) -> bytes:
    weights = numpy_helper.from_array(np.ones((4, 4), "float32"), "W")
    weights.ClearField("raw_data")
    weights.data_location = onnx.TensorProto.EXTERNAL
    entry = weights.external_data.add()
    entry.key, entry.value = "location", location
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["b", 4])],
        initializer=[weights],
    )
    return helper.make_model(graph).SerializeToString()


@pytest.mark.parametrize("location", ["../../../../etc/passwd", "/etc/passwd", "../../other_model/w.bin"])
def test_onnx_model_unreadable_refused_when_external_data_leaves_model_folder(repo: Path, location: str) -> None:
    config = onnx_config("m", 8, [("x", "TYPE_FP32", [4])], [("y", "TYPE_FP32", [4])])
    make_model(repo, "m", config, {1: {"model.onnx": _onnx_with_external(location)}})
    make_model(repo, "other_model", None, {1: {"model.py": ADD_SUB_MODEL_PY}}, files={"w.bin": b"\0" * 64})
    found = messages(validate(repo), "RB601")
    assert any("outside the model folder" in m for m in found), found


def test_onnx_model_unreadable_silent_when_external_data_sits_in_model_folder(repo: Path) -> None:
    config = onnx_config("m", 8, [("x", "TYPE_FP32", [4])], [("y", "TYPE_FP32", [4])])
    make_model(repo, "m", config, {1: {"model.onnx": _onnx_with_external("w.bin"), "w.bin": b"\0" * 64}})
    assert "RB601" not in codes(validate(repo))
