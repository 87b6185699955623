"""``cli/options.py``: the output options every command shares (``--format text|json``, ``-q``, ``-v``)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from repo_builder.cli.options import Output, output_options


@click.command("demo")
@click.argument("name")
@output_options
def demo(name: str, output: Output) -> None:
    output.progress(f"working on {name}")
    output.detail("detail")
    click.echo(f"{name} {output.format} quiet={output.quiet} verbose={output.verbose} json={output.json}")


def run(*args: str) -> click.testing.Result:
    return CliRunner().invoke(demo, list(args))


def test_output_options_reach_the_command_as_one_value_when_given() -> None:
    result = run("x", "--format", "json", "-v")
    assert result.exit_code == 0, result.output
    assert "x json quiet=False verbose=True json=True" in result.output
    assert "working on x" in result.output and "detail" in result.output


def test_output_options_default_to_text_with_progress_when_not_given() -> None:
    result = run("x")
    assert "x text quiet=False verbose=False json=False" in result.output
    assert "working on x" in result.output and "detail" not in result.output


def test_output_quiet_drops_progress_when_quiet() -> None:
    result = run("x", "--quiet")
    assert "quiet=True" in result.output and "working on" not in result.output


@pytest.mark.parametrize("args", [("-q", "-v"), ("--format", "xml")])
def test_output_options_exit_2_when_contradictory_or_unknown(args: tuple[str, ...]) -> None:
    assert run("x", *args).exit_code == 2


def test_output_options_are_listed_in_help_when_applied() -> None:
    text = run("--help").output
    assert "--format [text|json]" in text and "-q, --quiet" in text and "-v, --verbose" in text
