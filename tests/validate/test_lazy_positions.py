"""Position indexes (analysis/positions.py) cost a tokenizer pass per config: a repository whose models all
pass must never build one (issue 38: validate's speed); a finding still gets its line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.bench_repository import write_repository

from repo_builder.validate.analysis import positions
from repo_builder.validate.engine import validate_repository


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count every index built; the originals still answer (lru caches cleared, so a hit is no miss)."""
    built: list[str] = []

    def wrap(name: str) -> None:
        original: Callable[[str], Any] = getattr(positions, name)
        original.cache_clear()  # type: ignore[attr-defined]

        def counted(text: str) -> Any:
            built.append(name)
            return original(text)

        monkeypatch.setattr(positions, name, counted)

    wrap("config_index")
    wrap("config_elements")
    return built


def test_positions_not_indexed_when_every_model_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_repository(tmp_path / "repo")
    built = _counting(monkeypatch)
    report = validate_repository(root)
    assert [m.ok for m in report.models] == [True, True] and not report.diagnostics
    assert built == []


def test_positions_indexed_for_a_finding_when_a_model_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_repository(tmp_path / "repo")
    config = root / "double" / "config.pbtxt"
    config.write_text(config.read_text().replace("count: 1", "count: -1"), encoding="utf-8")
    built = _counting(monkeypatch)
    report = validate_repository(root)
    found = [d for d in report.diagnostics if d.model == "double"]
    assert found and all(d.line is not None for d in found)
    assert built
