"""RB608 onnx-op-library: model_operations libraries where the ONNX Runtime backend will look (never loaded offline)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.validate_repo_helpers import codes, make_model, messages, onnx_bytes, onnx_config, validate

from repo_builder.validate.records import Severity

GRAPH = onnx_bytes([("INPUT0", "INT32", ["b", 16])], [("OUTPUT0", "INT32", ["b", 16])])
IO = ([("INPUT0", "TYPE_INT32", [16])], [("OUTPUT0", "TYPE_INT32", [16])])


def _model(repo: Path, library: str, platform_graph: bool = True) -> None:
    extra = f'model_operations {{ op_library_filename: "{library}" }}'
    if platform_graph:
        make_model(repo, "m", onnx_config("m", 8, *IO, extra=extra), {1: {"model.onnx": GRAPH}})
    else:
        make_model(repo, "m", f'name: "m"\nbackend: "python"\nmax_batch_size: 0\n{extra}\n',
                   {1: {"model.py": b"class TritonPythonModel:\n    pass\n"}})


def test_op_library_refused_when_absolute_path_exists_only_on_this_machine(repo: Path, tmp_path: Path) -> None:
    # Issue 35: a library that exists here proves nothing about the server; this machine is never looked at.
    library = tmp_path / "libortextensions.so"
    library.write_bytes(b"\x7fELF not really loaded")
    _model(repo, str(library))
    report = validate(repo)
    assert "RB608" in codes(report, "m", Severity.ERROR)
    assert any("build machine" in m for m in messages(report, "RB608"))


def test_op_library_refused_when_absolute_path_missing(repo: Path, tmp_path: Path) -> None:
    _model(repo, str(tmp_path / "absent" / "libortextensions.so"))
    report = validate(repo)
    assert "RB608" in codes(report, "m", Severity.ERROR)
    assert any("build machine" in m for m in messages(report, "RB608"))


def test_op_library_refused_when_relative_to_model_folder(repo: Path) -> None:
    _model(repo, "1/libortextensions.so")
    (repo / "m" / "1" / "libortextensions.so").write_bytes(b"present in the model folder, not where dlopen looks")
    report = validate(repo)
    assert "RB608" in codes(report, "m", Severity.ERROR)
    assert any("server's working folder" in m for m in messages(report, "RB608"))


def test_op_library_warned_when_bare_name_on_library_path(repo: Path) -> None:
    _model(repo, "libortextensions.so")
    assert "RB608" in codes(validate(repo), "m", Severity.WARNING)


def test_op_library_warned_when_backend_ignores_model_operations(repo: Path, tmp_path: Path) -> None:
    _model(repo, str(tmp_path / "lib.so"), platform_graph=False)
    report = validate(repo)
    assert "RB608" in codes(report, "m", Severity.WARNING) and "RB608" not in codes(report, "m", Severity.ERROR)


@pytest.mark.parametrize("library", [""])
def test_op_library_refused_when_empty(repo: Path, library: str) -> None:
    _model(repo, library)
    assert "RB608" in codes(validate(repo), "m", Severity.ERROR)
