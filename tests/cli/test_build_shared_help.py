"""`build <family> --help` lists a per-family shared option (--top-k, --labels) only for the families that
read it (issue 38); the others refuse it in one line, as a usage error, before any work."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from repo_builder.cli.main import cli, main
from repo_builder.pipelines.registry import FAMILIES
from repo_builder.pipelines.request_options import BUILD_OPTIONS

PER_FAMILY = [o for o in BUILD_OPTIONS if o.per_family]


def _listed_flags(family: str) -> set[str]:
    result = CliRunner().invoke(cli, ["build", family, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return set(re.findall(r"^\s+(--[a-z0-9-]+)", result.output, re.M))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_build_help_lists_per_family_options_only_when_the_family_reads_them(family: str) -> None:
    listed = _listed_flags(family)
    assert "--out" in listed  # the shared options that every family reads stay listed
    for option in PER_FAMILY:
        assert (option.flags[0] in listed) == (option.dest in FAMILIES[family].shared_options), (family, option.flags[0])


def test_build_text_embedder_help_lists_neither_top_k_nor_labels() -> None:
    assert PER_FAMILY and not {"--top-k", "--labels"} & _listed_flags("text-embedder")


@pytest.mark.parametrize("flag, value", [("--top-k", "3"), ("--labels", "labels.txt")])
def test_build_text_embedder_refuses_in_one_line_when_given_an_option_it_does_not_read(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["build", "text-embedder", "--model", "m", "--out", "o", flag, value]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and len(error.splitlines()) == 1
    assert f"{flag}: build text-embedder does not read it" in error and "text-classifier" in error
