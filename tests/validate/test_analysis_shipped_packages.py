"""analysis/shipped_packages.py: the package folders of a Python step (version folder, model folder, the
subfolders model.py names), bounded; and a version folder holding thousands of shipped files trips no rule."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from support.python_env_helpers import fake_wheel, pil_step_source, python_step, step_source, write_manifest
from support.validate_repo_helpers import make_add_sub, validate

from repo_builder.deploy_target import resolve_target
from repo_builder.validate.analysis import shipped_packages
from repo_builder.validate.analysis.python_imports import python_imports
from repo_builder.validate.analysis.shipped_packages import module_name, step_packages
from repo_builder.validate.records import FileEntry
from repo_builder.validate.scan import list_folder, scan_repository

CP312 = "cp312-cp312-manylinux_2_17_x86_64"


def _packages(repo: Path, source: str) -> shipped_packages.StepPackages:
    model = scan_repository(repo).model("pre")
    assert model is not None
    v = model.version(1)
    assert v is not None
    return step_packages(model, v, python_imports(source.encode()))


@pytest.mark.parametrize(("entry", "module"), [
    (FileEntry("PIL", True), "PIL"),
    (FileEntry("six.py", False, 1), "six"),
    (FileEntry("_cffi_backend.cpython-312-x86_64-linux-gnu.so", False, 1), "_cffi_backend"),
    (FileEntry("_rust.abi3.so", False, 1), "_rust"),
    (FileEntry("pillow-13.0.0.dist-info", True), None),
    (FileEntry("pillow.libs", True), None),
    (FileEntry("__pycache__", True), None),
    (FileEntry("libjpeg.so.62", False, 1), None),
    (FileEntry("README.md", False, 1), None),
    (FileEntry("evil", True, escapes=True), None),
])
def test_module_name_names_importable_entries_when_listed(entry: FileEntry, module: str | None) -> None:
    assert module_name(entry) == module


def test_step_packages_reads_named_folder_when_model_py_names_it(repo: Path) -> None:
    source = pil_step_source()
    python_step(repo, "pre", source, files={"helper.py": ""})
    (repo / "pre" / "common.py").write_text("")
    fake_wheel(repo / "pre" / "1" / "site-packages", "pillow", "13.0.0", [CP312], ["PIL"],
               extensions=["_imaging.cpython-312-x86_64-linux-gnu.so"])
    found = _packages(repo, source)
    assert [f.folder for f in found.folders] == ["", "..", "site-packages"]
    assert {"PIL", "helper", "model", "common"} <= found.modules
    [dist] = list(found.distributions())
    assert (dist.name, dist.version, dist.tags) == ("pillow", "13.0.0", (CP312,))
    assert dist.extensions == ("PIL/_imaging.cpython-312-x86_64-linux-gnu.so",) and dist.modules == ("PIL",)


def test_step_packages_skips_folder_when_model_py_never_names_it(repo: Path) -> None:
    python_step(repo, "pre", step_source("import json"))
    fake_wheel(repo / "pre" / "1" / "site-packages", "pillow", "13.0.0", [CP312], ["PIL"])
    found = _packages(repo, step_source("import json"))
    assert [f.folder for f in found.folders] == ["", ".."] and "PIL" not in found.modules


def test_step_packages_reads_no_wheel_metadata_when_it_leaves_repository(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    fake_wheel(outside, "pillow", "13.0.0", ["cp39-cp39-win_amd64"], ["PIL"])
    source = pil_step_source()
    python_step(repo, "pre", source)
    site = repo / "pre" / "1" / "site-packages"
    site.mkdir()
    (site / "pillow-13.0.0.dist-info").mkdir()
    (site / "pillow-13.0.0.dist-info" / "WHEEL").symlink_to(outside / "pillow-13.0.0.dist-info" / "WHEEL")
    (site / "PIL").symlink_to(outside / "PIL")
    found = _packages(repo, source)
    [dist] = list(found.distributions())
    assert dist.tags == () and dist.problem is not None and "PIL" not in found.modules
    assert "RB422" not in {d.code for d in validate(repo, deploy=resolve_target("24.12")).diagnostics}


def test_step_packages_lists_no_folder_when_version_folder_has_none(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_add_sub(repo)

    def refuse(*_: object) -> None:
        raise AssertionError("listed a folder although no step names one")

    monkeypatch.setattr(shipped_packages, "list_folder", refuse)
    report = validate(repo, deploy=resolve_target("24.12"))
    assert report.ok, report.diagnostics


def test_list_folder_stops_when_limit_reached(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / f"f{i:02d}.py").write_text("")
    entries, truncated, problem = list_folder(tmp_path, tmp_path, 5)
    assert len(entries) == 5 and truncated and problem is None
    assert list_folder(tmp_path, tmp_path, 50)[1] is False
    assert list_folder(tmp_path / "absent", tmp_path, 5)[2] is not None


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_validate_finds_nothing_when_version_folder_ships_thousands_of_files(repo: Path) -> None:
    source = pil_step_source()
    python_step(repo, "pre", source)
    site = repo / "pre" / "1" / "site-packages"
    fake_wheel(site, "pillow", "13.0.0", [CP312], ["PIL"], extensions=["_imaging.cpython-312-x86_64-linux-gnu.so"],
               files_per_module=400)
    for i in range(12):  # 12 more wheels of 250 files: ~3,400 files with dist-infos, nested folders among them
        info = fake_wheel(site, f"dep{i}", "1.0", ["py3-none-any"], [f"dep{i}"], files_per_module=250)
        (site / f"dep{i}" / "sub" / "deeper").mkdir(parents=True)
        (site / f"dep{i}" / "sub" / "deeper" / "config.pbtxt").write_text("not a model config")
        (info / "LICENSE").write_text("x")
    (site / "bin").mkdir()
    (site / "bin" / "tool").write_text("#!/bin/sh\n")
    assert sum(len(files) for _, _, files in os.walk(site)) > 3000
    version = repo / "pre" / "1"
    files = {"model.py": _sha(version / "model.py"), "site-packages/PIL/__init__.py": _sha(site / "PIL" / "__init__.py")}
    write_manifest(repo, {"release": "24.12", "platform": "x86_64", "step_packages": "ship"},
                   {"pre": {"role": "preprocess", "versions": {"1": {"files": files}}}})
    for report in (validate(repo), validate(repo, deploy=resolve_target("24.12")), validate(repo, strict=True)):
        assert report.diagnostics == (), report.diagnostics
        assert report.image is not None and "Triton 24.12" in report.image


def test_step_packages_reads_hostile_metadata_without_failing_when_files_are_garbage(repo: Path) -> None:
    source = pil_step_source()
    python_step(repo, "pre", source)
    info = repo / "pre" / "1" / "site-packages" / "pillow-13.0.0.dist-info"
    info.mkdir(parents=True)
    (info / "WHEEL").write_bytes(b"\xff\xfe\x00garbage\nTag: cp39-cp39-win_amd64\n" + b"\x00" * 1000)
    (info / "RECORD").write_bytes(b'"' + b"x" * 300_000 + b"\n\x00PIL/_i.cpython-39-darwin.so,,\n")
    (info / "top_level.txt").write_bytes(b"../../etc\nPIL\n\x00\n")
    os.mkfifo(info / "METADATA")  # never opened: only WHEEL, RECORD and top_level.txt are read
    [dist] = list(_packages(repo, source).distributions())
    assert dist.tags == ("cp39-cp39-win_amd64",) and dist.modules == ("PIL",)
    report = validate(repo, deploy=resolve_target("24.12"))
    assert {d.code for d in report.diagnostics} == {"RB421", "RB422"}  # PIL/ is not there; the tag says Windows
