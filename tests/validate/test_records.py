"""The scan's records (and the report's model summaries) write their fields themselves (a faster ``__init__`` than the frozen dataclass's own):
each must set every field, from positional and keyword arguments alike, and stay frozen."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from repo_builder.validate.records import FileEntry, ModelEntry, VersionDir
from repo_builder.validate.report import ModelSummary
from repo_builder.validate.scan import child_text, scan_repository


@pytest.mark.parametrize("cls", [FileEntry, VersionDir, ModelEntry, ModelSummary])
def test_init_sets_every_field_and_keeps_defaults(cls: type) -> None:
    fields = dataclasses.fields(cls)
    # A distinct object per field: a field the __init__ forgot, or wrote under another's name, shows.
    values: dict[str, Any] = {f.name: object() for f in fields}
    if cls is ModelEntry:  # its __init__ reads the version folders' numbers (a tuple of its own, no defaults)
        values["versions"] = (VersionDir("2", Path("m/2"), 2), VersionDir("x", Path("m/x"), None), VersionDir("1", Path("m/1"), 1))
    by_keyword = cls(**values)
    by_position = cls(*values.values())
    for f in fields:
        assert getattr(by_keyword, f.name) is values[f.name], f.name
        assert getattr(by_position, f.name) is values[f.name], f.name
    required = {f.name: values[f.name] for f in fields if f.default is dataclasses.MISSING}
    defaults = cls(**required)
    for f in fields:
        if f.default is not dataclasses.MISSING:
            assert getattr(defaults, f.name) == f.default, f.name
    assert by_keyword == cls(**values) and hash(FileEntry("a", False)) == hash(FileEntry("a", False))
    if cls is ModelEntry:
        assert by_keyword.version_numbers == by_position.version_numbers == (1, 2)


def test_records_stay_frozen() -> None:
    entry = ModelEntry(name="m", path=Path("m"), config_path=Path("m/config.pbtxt"), config=None)
    summary = ModelSummary("m", True, (1,), "python")
    for record, field in ((FileEntry("a", False), "size"), (VersionDir("1", Path("m/1"), 1), "files"), (entry, "config"), (summary, "ok")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, None)
    assert entry.facts == {} and entry.version_numbers == ()  # the kept facts still live in the instance


@pytest.mark.parametrize("parent", [Path("/"), Path("."), Path("a/b"), Path("/x/y")])
def test_child_text_is_the_child_paths_text(parent: Path) -> None:
    assert child_text(parent, "m") == str(parent / "m")


def test_scanned_models_carry_their_paths_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a", "b"):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(f'name: "{name}" backend: "python"\n')
    monkeypatch.chdir(tmp_path)
    for location in (tmp_path, Path("."), "."):
        models = scan_repository(location).models
        assert [m.path_text for m in models] == [str(m.path) for m in models] and len(models) == 2
    # built without the scan's text, the entry formats its path itself
    assert ModelEntry(name="m", path=Path("r/m"), config_path=Path("r/m/config.pbtxt"), config=None).path_text == "r/m"
