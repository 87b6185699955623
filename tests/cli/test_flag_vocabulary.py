"""One vocabulary on the command line (issue 26), read from the click command tree so a new command or
family is held to it without being listed here: -q/-v everywhere, --gpu/--no-gpu with one default and one
help text, one visible name for the S3 endpoint, --format with --output wherever a report is written, and
top-level summaries that fit on one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from repo_builder.cli.main import COMMANDS, SUMMARIES, cli
from repo_builder.cli.options import GPU_HELP, target_line

# Commands that write a report (a summary or a document other tools read), hence --format and --output.
REPORTING = ("validate", "build", "bench", "publish", "pull")


def leaves() -> Iterator[tuple[str, click.Command]]:
    def walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    yield from walk(sub, f"{path} {name}".strip())
        else:
            yield path, command

    yield from walk(cli, "")


LEAVES = dict(leaves())


def option(command: click.Command, flag: str) -> click.Option | None:
    return next((p for p in command.params if isinstance(p, click.Option) and flag in (*p.opts, *p.secondary_opts)), None)


def test_command_tree_reaches_every_command_and_family_when_walked() -> None:
    tops = {path.split()[0] for path in LEAVES}
    assert tops == set(COMMANDS)
    assert {"build resnet50", "build text-classifier", "export text-classifier"} <= set(LEAVES)


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_every_command_takes_quiet_and_verbose_when_run(path: str) -> None:
    command = LEAVES[path]
    assert option(command, "-q") is not None and option(command, "--quiet") is not None, path
    assert option(command, "-v") is not None and option(command, "--verbose") is not None, path


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_gpu_option_has_one_default_and_one_help_when_a_command_judges_a_target(path: str) -> None:
    gpu = option(LEAVES[path], "--gpu")
    if gpu is None:
        pytest.skip(reason=f"{path} judges no deploy target")
    assert gpu.secondary_opts == ["--no-gpu"] and gpu.default is None and gpu.help == GPU_HELP


def test_gpu_option_is_offered_by_every_command_that_judges_a_target_when_listed() -> None:
    judging = {path.split()[0] for path, command in LEAVES.items() if option(command, "--gpu") is not None}
    assert {"validate", "build", "publish", "pull"} <= judging


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_s3_endpoint_has_one_visible_name_when_a_command_takes_one(path: str) -> None:
    command = LEAVES[path]
    old = option(command, "--s3-endpoint")
    assert old is None or old.hidden, f"{path}: --s3-endpoint is the hidden alias of --endpoint-url"
    visible = [o for p in command.params if isinstance(p, click.Option) and not p.hidden for o in p.opts if "endpoint" in o]
    assert visible in ([], ["--endpoint-url"]), path


@pytest.mark.parametrize("path", sorted(LEAVES))
def test_report_options_come_together_when_a_command_writes_a_report(path: str) -> None:
    command = LEAVES[path]
    has_format = option(command, "--format") is not None
    if path.split()[0] in REPORTING:
        assert has_format, path
    if has_format:
        assert option(command, "--output") is not None, f"{path}: --format without --output"


def test_top_level_help_gives_each_command_a_whole_one_line_summary_when_printed() -> None:
    text = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    rows = text.split("Commands:", 1)[1].strip().splitlines()
    assert [row.split()[0] for row in rows] == sorted(COMMANDS)
    assert all("..." not in row and len(row) <= 80 for row in rows), rows
    assert set(SUMMARIES) == set(COMMANDS)


def test_bench_json_stays_an_alias_when_old_scripts_pass_it() -> None:
    json_option = option(LEAVES["bench"], "--json")
    assert json_option is not None and json_option.hidden


@pytest.mark.parametrize(("gpu", "says"), [(None, "GPU server (the default; --no-gpu for a CPU fleet)"), (False, "CPU fleet (--no-gpu)"), (True, "GPU server (--gpu)")])
def test_target_line_says_the_target_and_why_when_printed(gpu: bool | None, says: str) -> None:
    assert target_line(gpu) == f"target: {says}"


def test_validate_refuses_both_endpoint_names_when_they_differ() -> None:
    runner = CliRunner()
    both = runner.invoke(cli, ["validate", "s3://b/p", "--endpoint-url", "http://a:1", "--s3-endpoint", "http://b:2"])
    assert both.exit_code == 2 and "old name of --endpoint-url" in both.output


def test_output_option_writes_the_report_to_the_file_when_given(tmp_path: Path) -> None:
    from repo_builder.cli.options import Output, output_options

    @click.command("demo")
    @output_options
    def demo(output: Output) -> None:
        output.progress("working")
        output.report('{"ok": true}' if output.json else "ok")

    runner = CliRunner()
    target = tmp_path / "report.json"
    done = runner.invoke(demo, ["--format", "json", "--output", str(target)])
    assert done.exit_code == 0 and target.read_text() == '{"ok": true}\n' and '"ok"' not in done.stdout
    missing = runner.invoke(demo, ["--output", str(tmp_path / "no" / "r.txt")])
    assert missing.exit_code != 0 and "does not exist" in str(missing.exception or missing.output)
