"""A store's listing laid out below a local folder (``store/local.py``): only plain relative keys land, and
inside the folder; files are fetched, left empty or made sparse at their listed size, as asked."""

from __future__ import annotations

from pathlib import Path

from repo_builder.store.fsspec_store import Listing, RemoteFile
from repo_builder.store.local import lay_out
from repo_builder.store.publish_record import PUBLISH_STATE_FILE


def _listing(files: dict[str, int], folders: tuple[str, ...] = ()) -> Listing:
    return Listing({r: RemoteFile(r, size) for r, size in files.items()}, frozenset(folders))


def test_lay_out_writes_nothing_outside_the_root_when_keys_try_to_leave_it(tmp_path: Path) -> None:
    root = tmp_path / "mirror"
    root.mkdir()
    outside = tmp_path / "etc"
    listing = _listing({"/etc/passwd": 5, "../etc/x": 5, "m/../../etc/y": 5, "m/1/model.py": 3}, ("/etc", "../etc"))
    fetch = lay_out(root, listing, lambda _r, _s: True, lambda _r: False)
    assert fetch == [("m/1/model.py", root / "m" / "1" / "model.py")]
    assert not outside.exists() and sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "m", "m/1", "m/1/model.py"
    ]


def test_lay_out_makes_unfetched_files_empty_or_sparse_when_told_which(tmp_path: Path) -> None:
    listing = _listing({"m/config.pbtxt": 5 << 20, "m/1/model.onnx": 1 << 30, "m/labels.txt": 10, PUBLISH_STATE_FILE: 9})
    fetch = lay_out(tmp_path, listing, lambda r, _s: r.endswith(".txt"), lambda r: r.endswith("config.pbtxt"))
    assert [r for r, _ in fetch] == ["m/labels.txt"]
    assert (tmp_path / "m" / "config.pbtxt").stat().st_size == 5 << 20  # the scan sees the listed size
    assert (tmp_path / "m" / "1" / "model.onnx").stat().st_size == 0
    assert not (tmp_path / PUBLISH_STATE_FILE).exists()  # the publish record is never part of the mirror


def test_lay_out_creates_explicit_folders_when_the_store_has_markers(tmp_path: Path) -> None:
    lay_out(tmp_path, _listing({}, ("pipeline", "pipeline/1")), lambda _r, _s: True, lambda _r: False)
    assert (tmp_path / "pipeline" / "1").is_dir()
