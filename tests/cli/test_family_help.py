"""`repo-builder build --help` and `export --help` list every family on one uncut line (issue 26)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from repo_builder.cli.main import cli
from repo_builder.pipelines.registry import FAMILIES


@pytest.mark.parametrize("group", ["build", "export"])
def test_family_listing_shows_each_family_whole_when_help_is_asked(group: str) -> None:
    result = CliRunner().invoke(cli, [group, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    listed = {line.split()[0]: line for line in result.output.split("Commands:")[1].splitlines() if line.strip()}
    for name, family in FAMILIES.items():
        if group == "export" and family.export is None:
            continue
        assert name in listed, name
        assert not listed[name].rstrip().endswith("..."), listed[name]
        assert family.short_help in listed[name]
