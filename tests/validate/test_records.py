"""The scan's records write their fields themselves (a faster ``__init__`` than the frozen dataclass's own):
each must set every field, from positional and keyword arguments alike, and stay frozen."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from repo_builder.validate.records import FileEntry, ModelEntry, VersionDir


@pytest.mark.parametrize("cls", [FileEntry, VersionDir, ModelEntry])
def test_init_sets_every_field_and_keeps_defaults(cls: type) -> None:
    fields = dataclasses.fields(cls)
    # A distinct object per field: a field the __init__ forgot, or wrote under another's name, shows.
    values: dict[str, Any] = {f.name: object() for f in fields}
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


def test_records_stay_frozen() -> None:
    entry = ModelEntry(name="m", path=Path("m"), config_path=Path("m/config.pbtxt"), config=None)
    for record, field in ((FileEntry("a", False), "size"), (VersionDir("1", Path("m/1"), 1), "files"), (entry, "config")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, None)
    assert entry.facts == {} and entry.version_numbers == ()  # the kept facts still live in the instance
