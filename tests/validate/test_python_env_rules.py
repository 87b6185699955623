"""RB421-RB423 (rules/python_env.py) and RB608's absolute paths: what a Python step imports, the packages it
ships and the paths its config names, judged as the target image (issue 35: "loads where it is deployed")."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from support.python_env_helpers import (
    fake_wheel,
    pil_step_source,
    python_step,
    step_source,
    write_manifest,
)
from support.validate_repo_helpers import codes, make_model, messages, onnx_bytes, onnx_config, validate

from repo_builder.cli.main import main
from repo_builder.deploy_target import resolve_target
from repo_builder.validate.records import Severity
from repo_builder.validate.report import Report

CP312_X86 = "cp312-cp312-manylinux_2_17_x86_64"


def judged(repo: Path, release: str = "24.12", **target: str) -> Report:
    return validate(repo, deploy=resolve_target(release, **target))  # type: ignore[arg-type]


def ship_pillow(repo: Path, tag: str = CP312_X86, named: bool = True, model: str = "pre") -> Path:
    python_step(repo, model, pil_step_source(names_site_packages=named))
    site = repo / model / "1" / "site-packages"
    fake_wheel(site, "pillow", "13.0.0", [tag], ["PIL"])
    return site


# RB421 python-import-missing: the done-when, through the CLI.


def test_validate_exits_1_and_names_pil_when_step_imports_pil_unshipped(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python_step(repo, "pre", pil_step_source(names_site_packages=False))
    assert main(["validate", str(repo), "--triton-release", "24.12"]) == 1
    out = capsys.readouterr().out
    assert "RB421" in out and "ModuleNotFoundError: No module named 'PIL'" in out
    assert "pre/1/model.py:6:1" in out and "nvcr.io/nvidia/tritonserver:24.12-py3 (Python 3.12)" in out
    assert "--step-packages dockerfile" in out and "--python-version 3.12" in out


def test_validate_passes_when_pillow_shipped_for_image_and_folder_named(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ship_pillow(repo)
    assert main(["validate", str(repo), "--triton-release", "24.12"]) == 0, capsys.readouterr().out
    assert "Python steps judged in Triton 24.12 (nvcr.io/nvidia/tritonserver:24.12-py3, Python 3.12, x86_64)" in capsys.readouterr().out


def test_validate_judges_cp310_wheel_by_release_when_python_differs(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ship_pillow(repo, "cp310-cp310-manylinux_2_17_x86_64")
    assert main(["validate", str(repo), "--triton-release", "24.12"]) == 1
    assert "RB422" in capsys.readouterr().out
    assert main(["validate", str(repo), "--triton-release", "24.05"]) == 0, capsys.readouterr().out


def test_validate_refuses_aarch64_wheel_when_target_is_x86_64(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ship_pillow(repo, "cp312-cp312-manylinux_2_17_aarch64")
    assert main(["validate", str(repo), "--triton-release", "24.12"]) == 1
    assert "built for aarch64, not x86_64" in capsys.readouterr().out
    assert main(["validate", str(repo), "--triton-release", "24.12", "--platform", "aarch64"]) == 0


def test_validate_judges_no_image_and_says_so_when_no_release_and_no_manifest(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python_step(repo, "pre", pil_step_source(names_site_packages=False))
    assert main(["validate", str(repo)]) == 0
    out = capsys.readouterr().out
    assert "RB421" not in out and "Python steps' imports not judged: no --triton-release" in out.splitlines()[1]
    assert main(["validate", str(repo), "--format", "json"]) == 0
    image = json.loads(capsys.readouterr().out)["image"]
    assert image["judged"] is False and image["release"] is None and "not judged" in image["text"]


def test_python_import_missing_never_imports_step_when_scanned(repo: Path, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    source = f"open({str(canary)!r}, 'w').write('imported')\nraise SystemExit(3)\nimport PIL\n" + step_source()
    python_step(repo, "pre", source, files={"helper.py": f"open({str(canary)!r}, 'w')\nimport cv2\n"})
    site = repo / "pre" / "1" / "site-packages"
    fake_wheel(site, "evil", "1.0", ["py3-none-any"], ["evil"])  # its __init__ raises when imported
    report = judged(repo)
    assert "RB421" in codes(report, "pre", Severity.ERROR)
    assert not canary.exists()


# RB421: where an import runs, and what provides it.


@pytest.mark.parametrize("guarded", [
    "try:\n    import orjson\nexcept ImportError:\n    import json as orjson",
    "try:\n    from PIL import Image\nexcept (ModuleNotFoundError, ValueError):\n    Image = None",
    "try:\n    import cv2\nexcept Exception:\n    cv2 = None",
    "try:\n    import cv2\nexcept:\n    cv2 = None",
    "import contextlib\nwith contextlib.suppress(ImportError):\n    import cv2",
    "import sys\nif sys.version_info < (3, 11):\n    import tomli as tomllib\nelse:\n    import tomllib",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch",
    'if __name__ == "__main__":\n    import pytest',
])
def test_python_import_missing_passes_when_import_is_optional(repo: Path, guarded: str) -> None:
    python_step(repo, "pre", step_source(guarded))
    assert "RB421" not in codes(judged(repo))


@pytest.mark.parametrize(("source", "module", "line"), [
    ("class TritonPythonModel:\n    def initialize(self, args):\n        import tokenizers\n", "tokenizers", 3),
    ("class TritonPythonModel:\n    import cv2\n    def execute(self, requests):\n        return []\n", "cv2", 2),
    ("import importlib\nclass TritonPythonModel:\n    def initialize(self, args):\n        self.m = importlib.import_module('onnxruntime')\n",
     "onnxruntime", 4),
    ("try:\n    import orjson\nexcept KeyError:\n    pass\nclass TritonPythonModel:\n    pass\n", "orjson", 2),
])
def test_python_import_missing_refused_when_import_runs_in_stub(repo: Path, source: str, module: str, line: int) -> None:
    python_step(repo, "pre", source)
    report = judged(repo)
    [d] = [d for d in report.diagnostics if d.code == "RB421"]
    assert f"No module named '{module}'" in d.message and d.line == line and d.path == "pre/1/model.py"


def test_python_import_missing_passes_when_module_is_image_stdlib_or_package(repo: Path) -> None:
    imports = ("import json, asyncio, sqlite3", "import numpy", "import setuptools, pkg_resources", "import packaging.version",
               "import virtualenv, filelock, platformdirs, distlib", "import triton_python_backend_utils as pb_utils",
               "import c_python_backend_utils", "import pip", "from __future__ import annotations")
    python_step(repo, "pre", step_source(*imports[-1:], *imports[:-1]))
    assert "RB421" not in codes(judged(repo)), messages(judged(repo), "RB421")


@pytest.mark.parametrize(("module", "missing_in", "present_in"), [("imp", "24.12", "24.05"), ("tomllib", "24.05", "24.12")])
def test_python_import_missing_follows_image_python_when_stdlib_differs(repo: Path, module: str, missing_in: str,
                                                                         present_in: str) -> None:
    python_step(repo, "pre", step_source(f"import {module}"))
    report = judged(repo, missing_in)
    assert messages(report, "RB421") and "standard library of Python" in report.diagnostics[0].hint  # type: ignore[operator]
    assert "RB421" not in codes(judged(repo, present_in))


def test_python_import_missing_refused_when_tkinter_left_out_of_ubuntu_python(repo: Path) -> None:
    python_step(repo, "pre", step_source("import tkinter"))
    assert "RB421" in codes(judged(repo))


def test_python_import_missing_refused_when_folder_holding_it_is_not_named(repo: Path) -> None:
    ship_pillow(repo, named=False)
    report = judged(repo)
    [d] = [d for d in report.diagnostics if d.code == "RB421"]
    assert "never names 'site-packages'" in (d.hint or "")


def test_python_import_missing_follows_step_own_modules_when_model_py_imports_them(repo: Path) -> None:
    python_step(repo, "pre", step_source("import helper", "from . import util"),
                files={"helper.py": "import os\n\nimport cv2\n", "util.py": "import json\n"})
    report = judged(repo)
    [d] = [d for d in report.diagnostics if d.code == "RB421"]
    assert d.path == "pre/1/helper.py" and d.line == 3 and "'cv2'" in d.message


def test_python_import_missing_passes_when_module_is_in_version_or_model_folder(repo: Path) -> None:
    python_step(repo, "pre", step_source("import helper", "import pkg.sub", "import shared", "from .helper import x"),
                files={"helper.py": "x = 1\n", "pkg": {"sub.py": ""}})
    (repo / "pre" / "shared.py").write_text("")
    assert "RB421" not in codes(judged(repo))


@pytest.mark.parametrize(("line", "says"), [
    ("from .. import shared", "attempted relative import beyond top-level package"),
    ("from . import missing", "cannot import name 'missing' from '1'"),
    ("from .missing import x", "No module named '1.missing'"),
])
def test_python_import_missing_refused_when_relative_import_leaves_version_folder(repo: Path, line: str, says: str) -> None:
    python_step(repo, "pre", step_source(line))
    assert any(says in m for m in messages(judged(repo), "RB421"))


def test_python_import_missing_passes_when_dockerfile_installs_module(repo: Path) -> None:
    python_step(repo, "pre", pil_step_source(names_site_packages=False))
    write_manifest(repo, {"release": "24.12", "gpu": True, "platform": "x86_64", "step_packages": "dockerfile",
                          "dockerfile": "Dockerfile", "image_provides": {"PIL": "pillow==13.0.0"}})
    report = validate(repo)
    assert "RB421" not in codes(report) and report.image is not None and "Dockerfile installs" in report.image
    assert main(["validate", str(repo), "--triton-release", "24.05"]) == 0  # the repository's Dockerfile still counts


def test_python_import_missing_uses_manifest_target_when_no_release_given(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python_step(repo, "pre", pil_step_source(names_site_packages=False))
    write_manifest(repo, {"release": "24.05", "gpu": True, "platform": "x86_64", "step_packages": "ship"})
    assert main(["validate", str(repo)]) == 1
    out = capsys.readouterr().out
    assert "No module named 'PIL'" in out and "Triton 24.05" in out and "(from repo-builder.json)" in out


def test_python_import_missing_info_when_step_runs_in_execution_env(repo: Path) -> None:
    extra = 'parameters { key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/env.tar.gz" } }\n'
    python_step(repo, "pre", pil_step_source(names_site_packages=False), extra=extra)
    _pack_env(repo / "pre" / "env.tar.gz")
    report = judged(repo)
    assert codes(report, "pre") == {"RB421"} and codes(report, "pre", Severity.INFO) == {"RB421"}


# RB422 python-package-incompatible


@pytest.mark.parametrize("tag", [CP312_X86, "py3-none-any", "py2.py3-none-any", "cp38-abi3-manylinux_2_28_x86_64",
                                 "cp312-cp312-manylinux_2_39_x86_64", "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64"])
def test_python_package_incompatible_passes_when_wheel_fits_image(repo: Path, tag: str) -> None:
    ship_pillow(repo, tag)
    assert codes(judged(repo)) == set()


@pytest.mark.parametrize(("tag", "says"), [
    ("cp311-cp311-manylinux_2_17_x86_64", "built for CPython 3.11"),
    ("cp313-abi3-manylinux_2_17_x86_64", "needs Python 3.13 or newer"),
    ("cp312-cp312-manylinux_2_40_x86_64", "needs glibc 2.40, the image has 2.39"),
    ("cp312-cp312-macosx_11_0_arm64", "built for macOS"),
    ("cp312-cp312-win_amd64", "built for Windows"),
    ("cp312-cp312-musllinux_1_2_x86_64", "musl"),
])
def test_python_package_incompatible_refused_when_wheel_built_for_other_target(repo: Path, tag: str, says: str) -> None:
    ship_pillow(repo, tag)
    report = judged(repo)
    [d] = [d for d in report.diagnostics if d.code == "RB422"]
    assert says in d.message and "pillow 13.0.0" in d.message and tag in d.message and "24.12-py3" in d.message
    assert d.path == "pre/1/site-packages/pillow-13.0.0.dist-info"


def test_python_package_incompatible_refused_when_glibc_newer_than_jammy_image(repo: Path) -> None:
    ship_pillow(repo, "cp310-cp310-manylinux_2_39_x86_64")
    assert any("the image has 2.35" in m for m in messages(judged(repo, "24.05"), "RB422"))


def test_python_package_incompatible_names_file_when_record_lists_other_python_module(repo: Path) -> None:
    python_step(repo, "pre", pil_step_source())
    fake_wheel(repo / "pre" / "1" / "site-packages", "pillow", "13.0.0", [CP312_X86], ["PIL"],
               extensions=["_imaging.cpython-311-x86_64-linux-gnu.so"])
    [message] = messages(judged(repo), "RB422")
    assert "PIL/_imaging.cpython-311-x86_64-linux-gnu.so" in message and "CPython 3.11" in message


def test_python_package_incompatible_refused_when_version_folder_holds_foreign_module(repo: Path) -> None:
    python_step(repo, "pre", step_source("import _fast"), files={"_fast.cpython-310-x86_64-linux-gnu.so": b"\x7fELF"})
    report = judged(repo)
    assert "RB421" not in codes(report) and any("_fast.cpython-310" in m for m in messages(report, "RB422"))


def test_python_package_incompatible_ignores_folder_when_step_never_names_it(repo: Path) -> None:
    python_step(repo, "pre", step_source("import json"))
    fake_wheel(repo / "pre" / "1" / "vendor", "pillow", "13.0.0", ["cp39-cp39-win_amd64"], ["PIL"])
    assert "RB422" not in codes(judged(repo))


def test_python_package_incompatible_not_run_when_no_target(repo: Path) -> None:
    ship_pillow(repo, "cp39-cp39-win_amd64")
    assert codes(validate(repo)) == set()


# RB423 python-execution-env-path


def _pack_env(path: Path) -> None:
    with tarfile.open(path, "w:gz"):
        pass


def _env_step(repo: Path, value: str) -> None:
    extra = f'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{value}" }} }}\n'
    python_step(repo, "pre", step_source("import json"), extra=extra)


def test_python_execution_env_path_passes_when_shipped_in_model_folder(repo: Path) -> None:
    _env_step(repo, "$$TRITON_MODEL_DIRECTORY/python_env.tar.gz")
    _pack_env(repo / "pre" / "python_env.tar.gz")
    assert "RB423" not in codes(validate(repo))


def test_python_execution_env_path_passes_when_folder_has_activate(repo: Path) -> None:
    _env_step(repo, "$$TRITON_MODEL_DIRECTORY/env")
    (repo / "pre" / "env" / "bin").mkdir(parents=True)
    (repo / "pre" / "env" / "bin" / "activate").write_text("")
    assert "RB423" not in codes(judged(repo))


@pytest.mark.parametrize(("value", "says"), [
    ("$$TRITON_MODEL_DIRECTORY/absent.tar.gz", "not a file or folder inside the model folder"),
    ("$$TRITON_MODEL_DIRECTORY/../other/env.tar.gz", "leaves the model folder"),
    ("$$TRITON_MODEL_DIRECTORYenv.tar.gz", "leaves the model folder"),
    ("envs/$$TRITON_MODEL_DIRECTORY/env.tar.gz", "only at the start"),
    ("python_env.tar.gz", "relative"),
    ("/home/builder/envs/pre.tar.gz", "build machine"),
])
def test_python_execution_env_path_refused_when_server_lacks_it(repo: Path, value: str, says: str) -> None:
    _env_step(repo, value)
    _pack_env(repo / "pre" / "python_env.tar.gz")
    report = validate(repo)
    assert "RB423" in codes(report, "pre", Severity.ERROR) and any(says in m for m in messages(report, "RB423"))


def test_python_execution_env_path_refused_when_path_is_this_repository_copy(repo: Path) -> None:
    _pack_env(repo.parent / "env.tar.gz")
    _env_step(repo, str(repo / "pre" / "python_env.tar.gz"))
    _pack_env(repo / "pre" / "python_env.tar.gz")
    assert any("this machine's copy of the repository" in m for m in messages(validate(repo), "RB423"))


def test_python_execution_env_path_warned_when_in_image_folders(repo: Path) -> None:
    _env_step(repo, "/opt/envs/pre.tar.gz")
    assert "RB423" in codes(judged(repo), "pre", Severity.WARNING)


def test_python_execution_env_path_refused_when_folder_lacks_activate(repo: Path) -> None:
    _env_step(repo, "$$TRITON_MODEL_DIRECTORY/env")
    (repo / "pre" / "env").mkdir()
    assert any("bin/activate" in m for m in messages(validate(repo), "RB423"))


# RB608 onnx-op-library: absolute paths judged as the image, never by looking on this machine.

GRAPH = onnx_bytes([("INPUT0", "INT32", ["b", 16])], [("OUTPUT0", "INT32", ["b", 16])])
ORTX = "onnxruntime_extensions/_extensions_pydll.cpython-312-x86_64-linux-gnu.so"


def _onnx_model(repo: Path, library: str) -> None:
    extra = f'model_operations {{ op_library_filename: "{library}" }}'
    make_model(repo, "tok", onnx_config("tok", 8, [("INPUT0", "TYPE_INT32", [16])], [("OUTPUT0", "TYPE_INT32", [16])], extra=extra),
               {1: {"model.onnx": GRAPH}})


def test_onnx_op_library_refused_when_absolute_path_is_build_machine_venv(repo: Path, tmp_path: Path) -> None:
    library = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "onnxruntime_extensions" / "lib.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"\x7fELF exists here, on no server")
    _onnx_model(repo, str(library))
    for report in (validate(repo), judged(repo)):
        assert "RB608" in codes(report, "tok", Severity.ERROR)


def test_onnx_op_library_passes_when_dockerfile_image_installs_extensions(repo: Path) -> None:
    _onnx_model(repo, f"/usr/local/lib/python3.12/dist-packages/{ORTX}")
    write_manifest(repo, {"release": "24.12", "platform": "x86_64", "step_packages": "dockerfile",
                          "image_provides": {"onnxruntime_extensions": "onnxruntime-extensions==0.13.0"}})
    assert "RB608" not in codes(validate(repo))


@pytest.mark.parametrize(("library", "release", "says"), [
    (f"/usr/local/lib/python3.12/dist-packages/{ORTX}", "24.12", "not one nvcr.io/nvidia/tritonserver:24.12-py3 has"),
    (f"/usr/local/lib/python3.12/dist-packages/{ORTX}", "24.05", "made for Python 3.12"),
    ("/opt/tritonserver/backends/ortx/libortextensions.so", "24.12", "does not ship ('ortx')"),
])
def test_onnx_op_library_refused_when_target_image_lacks_it(repo: Path, library: str, release: str, says: str) -> None:
    _onnx_model(repo, library)
    report = judged(repo, release)
    assert "RB608" in codes(report, "tok", Severity.ERROR) and any(says in m for m in messages(report, "RB608"))


def test_onnx_op_library_warned_when_path_in_image_folders_validate_cannot_see(repo: Path) -> None:
    _onnx_model(repo, "/opt/tritonserver/lib/libortextensions.so")
    assert "RB608" in codes(judged(repo), "tok", Severity.WARNING)
    assert "RB608" in codes(validate(repo), "tok", Severity.WARNING)


def test_onnx_op_library_warned_when_path_names_model_file_under_mount(repo: Path) -> None:
    _onnx_model(repo, "/models/tok/1/libortextensions.so")
    (repo / "tok" / "1" / "libortextensions.so").write_bytes(b"\x7fELF")
    report = validate(repo)
    assert "RB608" in codes(report, "tok", Severity.WARNING) and any("mounts the repository at /models" in m
                                                                     for m in messages(report, "RB608"))


def test_python_import_missing_leaves_it_to_rb407_when_model_py_is_nested_too_deep_to_compile(repo: Path) -> None:
    python_step(repo, "pre", "x = " + "-" * 100_000 + "1\nimport PIL\n" + step_source())
    report = judged(repo)
    assert "RB407" in codes(report, "pre", Severity.ERROR)  # CPython cannot compile it (issue 38)
    assert "RB421" not in codes(report, "pre", Severity.ERROR)
