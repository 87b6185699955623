"""The reference check batches no more than the ensemble's config takes (issue 39: a detector export with a
fixed batch axis is served with max_batch_size 1 even when built from an export with --max-batch-size 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repo_builder.pipelines.reference import served_batch


def write_ensemble(root: Path, text: str | None) -> Path:
    (root / "det").mkdir(parents=True)
    if text is not None:
        (root / "det" / "config.pbtxt").write_text(text)
    return root


@pytest.mark.parametrize(
    ("config", "recorded", "expected"),
    [
        ('name: "det"\nplatform: "ensemble"\nmax_batch_size: 1\n', 8, 1),  # the family capped the ensemble
        ('name: "det"\nplatform: "ensemble"\nmax_batch_size: 8\n', 4, 4),  # never more than the build recorded
        ('name: "det"\nplatform: "ensemble"\nmax_batch_size: 0\n', 8, 8),  # no batching axis: the record stands
        (None, 8, 8),  # unreadable config: the record stands (the check fails later, naming the config)
        ("max_batch_size: {", 8, 8),
    ],
)
def test_reference_batch_is_the_ensemble_configs_when_it_caps_the_build(tmp_path: Path, config: str | None, recorded: int,
                                                                          expected: int) -> None:
    assert served_batch(write_ensemble(tmp_path / "repo", config), "det", recorded) == expected
