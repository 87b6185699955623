"""Staging, versions, atomic moves and the manifest, on small hand-made models (no export needed)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from repo_builder.errors import UserError
from repo_builder.render.rendered import RenderedModel
from repo_builder.repository.manifest import MANIFEST_FILE, update_manifest
from repo_builder.repository.versions import existing_versions, plan_versions
from repo_builder.repository.writer import (
    STAGE_PREFIX,
    commit_models,
    remove_stale_stages,
    stage_model,
    staging_area,
)

CONFIG = 'name: "{name}"\nbackend: "python"\nmax_batch_size: 4\n'


def python_model(name: str, version: int, marker: str = "v") -> RenderedModel:
    source = f"class TritonPythonModel:\n    MARK = {marker!r}\n".encode()
    return RenderedModel(name, "preprocess", version, CONFIG.format(name=name), {"model.py": source})


def write(out: Path, models: list[RenderedModel], force: bool = False) -> list:
    with staging_area(out, prefer=[m.name for m in models]) as stage:
        staged = [stage_model(stage, m) for m in models]
        commit_models(out, staged, force=force)
    return staged


def test_plan_versions_picks_next_free_version_when_steps_differ(tmp_path: Path) -> None:
    for rel in ("a/1", "a/3", "a/07", "a/tmp", "b/1"):
        (tmp_path / rel).mkdir(parents=True)
    assert existing_versions(tmp_path / "a") == (1, 3)  # '07' and 'tmp' are ignored by Triton
    assert plan_versions(tmp_path, ["a", "b", "c"], None, False) == {"a": 4, "b": 2, "c": 1}


def test_plan_versions_raises_user_error_when_version_exists_without_force(tmp_path: Path) -> None:
    (tmp_path / "a" / "2").mkdir(parents=True)
    with pytest.raises(UserError, match="--force"):
        plan_versions(tmp_path, ["a", "b"], 2, False)
    assert plan_versions(tmp_path, ["a", "b"], 2, True) == {"a": 2, "b": 2}


def test_commit_writes_models_and_leaves_no_stage_when_repository_new(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1), python_model("post", 1)])
    assert sorted(p.name for p in out.iterdir()) == ["post", "pre"]
    assert (out / "pre" / "1" / "model.py").is_file() and (out / "pre" / "config.pbtxt").is_file()
    assert not list(out.rglob(STAGE_PREFIX + "*"))


def test_commit_replaces_version_when_forced(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1, "old")])
    write(out, [python_model("pre", 1, "new")], force=True)
    assert "'new'" in (out / "pre" / "1" / "model.py").read_text()
    assert not list(out.rglob(STAGE_PREFIX + "*"))


def test_commit_raises_user_error_when_version_exists_and_not_forced(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1, "old")])
    with pytest.raises(UserError, match="--force"):
        write(out, [python_model("pre", 1, "new")])
    assert "'old'" in (out / "pre" / "1" / "model.py").read_text()


def test_staging_area_lives_in_a_model_folder_when_one_exists(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1)])
    with staging_area(out, prefer=["pre"]) as stage:
        # Inside a model folder a leftover is a non-numeric version folder, which Triton skips.
        assert stage.parent == out / "pre"
        assert stage.name.startswith(STAGE_PREFIX)
    assert not stage.exists()


def test_remove_stale_stages_removes_leftovers_of_dead_builds_when_next_build_starts(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1)])
    dead = out / "pre" / f"{STAGE_PREFIX}dead"
    dead.mkdir()
    (dead / "owner.pid").write_text("999999999\n")  # no such process
    mine = out / "pre" / f"{STAGE_PREFIX}alive"
    mine.mkdir()
    (mine / "owner.pid").write_text(f"{os.getpid()}\n")
    assert remove_stale_stages(out) == [dead]
    assert mine.exists()


def test_stage_model_moves_files_made_in_the_stage_when_given_paths(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    with staging_area(out) as stage:
        big = stage / "export" / "model.onnx"
        big.parent.mkdir()
        big.write_bytes(b"onnx-bytes")
        outside = tmp_path / "labels.txt"
        outside.write_text("a\n")
        model = RenderedModel("m", "model", 1, CONFIG.format(name="m"), {"model.onnx": big, "labels.txt": outside, "model.py": b"x = 1\n"})
        staged = stage_model(stage, model)
        assert not big.exists()  # renamed, not copied
        assert outside.exists()  # copied from outside the stage
        assert staged.files["model.onnx"] == hashlib.sha256(b"onnx-bytes").hexdigest()


def test_rendered_model_rejects_paths_outside_version_folder_when_relative_escape() -> None:
    with pytest.raises(ValueError, match="relative path"):
        RenderedModel("m", "model", 1, "", {"../evil": b""})


def test_manifest_records_hashes_and_settings_when_models_written(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    staged = write(out, [python_model("pre", 1)])
    update_manifest(out, staged, {"runtime": "python", "max_batch_size": 4})
    staged2 = write(out, [python_model("pre", 2, "two")])
    update_manifest(out, staged2, {"runtime": "python", "max_batch_size": 4})
    data = json.loads((out / MANIFEST_FILE).read_text())
    versions = data["models"]["pre"]["versions"]
    assert sorted(versions) == ["1", "2"]
    on_disk = hashlib.sha256((out / "pre" / "2" / "model.py").read_bytes()).hexdigest()
    assert versions["2"]["files"]["model.py"] == on_disk
    assert versions["2"]["settings"]["runtime"] == "python"
    assert data["models"]["pre"]["config_sha256"] == hashlib.sha256((out / "pre" / "config.pbtxt").read_bytes()).hexdigest()


def test_staging_area_raises_user_error_when_out_is_a_file(tmp_path: Path) -> None:
    out = tmp_path / "file"
    out.write_text("x")
    with pytest.raises(UserError, match="not a folder"), staging_area(out):
        pass
