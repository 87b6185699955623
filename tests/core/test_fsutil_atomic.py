"""repo_builder.fsutil: the hashing, atomic-write and staging helpers every writer shares."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from repo_builder.errors import UserError
from repo_builder.export.staging import STAGING_MARK, staged_output
from repo_builder.fsutil import (
    move_into_place,
    pid_alive,
    prepare_out_dir,
    read_json_format,
    sha256_file,
    staging_folder,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)


def test_sha256_file_matches_hashlib_when_file_spans_several_blocks(tmp_path: Path) -> None:
    data = os.urandom((2 << 20) + 17)
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_write_text_atomic_replaces_content_and_leaves_no_temp_when_target_exists(tmp_path: Path) -> None:
    path = tmp_path / "config.pbtxt"
    path.write_text("old\n")
    write_text_atomic(path, "new ü\n")
    assert path.read_text(encoding="utf-8") == "new ü\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.pbtxt"]


def test_write_bytes_atomic_gives_the_umask_mode_when_creating(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_bytes_atomic(tmp_path / "plan.json", b"{}")
    finally:
        os.umask(old)
    # Readable by a server running as another user (mkstemp would have made it 0600).
    assert (tmp_path / "plan.json").stat().st_mode & 0o777 == 0o644


def test_write_bytes_atomic_keeps_old_file_and_no_temp_when_write_fails(tmp_path: Path) -> None:
    path = tmp_path / "model.plan"
    path.write_bytes(b"old")
    with pytest.raises(TypeError):
        write_bytes_atomic(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.plan"]


def test_write_json_atomic_sorts_keys_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    write_json_atomic(path, {"b": 1, "a": 2}, sort_keys=True)
    assert path.read_text() == '{\n  "a": 2,\n  "b": 1\n}\n'


@pytest.mark.parametrize("text", ['{"format": 2}', "[1]", "{"])
def test_read_json_format_raises_value_error_when_not_the_format(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(ValueError):
        read_json_format(path, 1)


def test_read_json_format_returns_object_when_format_matches(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"format": 1, "plans": {}}))
    assert read_json_format(path, 1) == {"format": 1, "plans": {}}


def test_prepare_out_dir_raises_user_error_when_out_is_a_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("x")
    with pytest.raises(UserError, match=r"--out .*not a folder"):
        prepare_out_dir(out)


def test_staging_folder_is_removed_when_the_body_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), staging_folder(tmp_path, ".stage-") as stage:
        (stage / "f").write_text("x")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_move_into_place_replaces_files_and_folders_when_targets_exist(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "tokenizer").mkdir(parents=True)
    (out / "tokenizer" / "old.json").write_text("old")
    (out / "signature.json").write_text("old")
    with staging_folder(out, ".stage-") as stage:
        (stage / "tokenizer").mkdir()
        (stage / "tokenizer" / "tokenizer.json").write_text("new")
        (stage / "signature.json").write_text("new")
        move_into_place(stage, out, last=("signature.json",))
    assert sorted(p.name for p in out.iterdir()) == ["signature.json", "tokenizer"]
    assert [p.name for p in (out / "tokenizer").iterdir()] == ["tokenizer.json"]
    assert (out / "signature.json").read_text() == "new"


def test_pid_alive_is_false_when_pid_is_gone_or_names_a_group() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(999_999_999)
    assert not pid_alive(0)


def test_staged_output_removes_stagings_of_dead_exports_when_next_export_starts(tmp_path: Path) -> None:
    out = tmp_path / "export"
    dead = out / f"{STAGING_MARK}999999999-abc"
    dead.mkdir(parents=True)
    alive = out / f"{STAGING_MARK}{os.getpid()}-def"  # a running export's: kept
    alive.mkdir()
    with staged_output(out) as staging:
        assert staging.name.startswith(f"{STAGING_MARK}{os.getpid()}-")
        (staging / "signature.json").write_text("{}")
    assert sorted(p.name for p in out.iterdir()) == sorted([alive.name, "signature.json"])
