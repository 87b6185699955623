"""Build options are declared once (pipelines/request_options.py, issue 22): every `build <family>` command
offers exactly those flags with their declared defaults and help, BuildRequest's and CheckRequest's fields are
exactly the declared options with the same defaults, and the README's build section names every flag."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import click
import pytest

from repo_builder.cli.build import command as build_group
from repo_builder.cli.build import family_command
from repo_builder.pipelines.build_check import CheckRequest
from repo_builder.pipelines.build_request import BuildRequest
from repo_builder.pipelines.family import FamilyOption
from repo_builder.pipelines.registry import FAMILIES
from repo_builder.pipelines.request_options import (
    BUILD_OPTIONS,
    CHECK_DEFAULTS,
    CHECK_OPTIONS,
    NEGATED_FIELDS,
    REQUEST_DEFAULTS,
    SHARED_OPTIONS,
    request_fields,
)

README = Path(__file__).resolve().parents[2] / "README.md"
# BuildRequest fields that are not options of their own: the subcommand, the family's options, the check's.
NOT_OPTIONS = {"family", "params", "check"}


def _option(command: click.Command, dest: str) -> click.Option:
    found = [p for p in command.params if isinstance(p, click.Option) and p.name == dest]
    assert len(found) == 1, f"{command.name}: {dest} declared {len(found)} times"
    return found[0]


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("declared", BUILD_OPTIONS + CHECK_OPTIONS, ids=lambda o: o.flags[0])
def test_build_command_offers_the_declared_option_when_generated(family: str, declared: FamilyOption) -> None:
    command = build_group.get_command(click.Context(build_group), family)
    assert command is not None
    option = _option(command, declared.dest)
    assert tuple(option.opts) == declared.flags
    if declared.per_family and declared.dest not in FAMILIES[family].shared_options:
        # A shared option the family does not read: hidden from its --help, refused when given (cli/build.py).
        assert option.hidden and option.get_default(click.Context(command)) is None
        return
    assert option.help == declared.help and option.required == declared.required
    assert option.get_default(click.Context(command)) == (False if declared.kind == "flag" else declared.default)
    assert option.is_flag == (declared.kind == "flag")
    if declared.kind == "choice":
        assert isinstance(option.type, click.Choice) and tuple(option.type.choices) == declared.choices


def test_build_command_declares_no_request_option_elsewhere_when_its_flags_are_counted() -> None:
    """A flag that fills a BuildRequest field comes from BUILD_OPTIONS, not from a click.option of its own."""
    chosen = next(iter(FAMILIES.values()))
    command = family_command(chosen)
    request_dests = {NEGATED_FIELDS.get(o.dest, o.dest) for o in BUILD_OPTIONS}
    fields = {f.name for f in dataclasses.fields(BuildRequest)} - NOT_OPTIONS
    assert fields == request_dests  # every request field is a declared option, and every option a field
    names = {p.name for p in command.params if isinstance(p, click.Option)}
    assert {o.dest for o in BUILD_OPTIONS} <= names


def test_request_defaults_equal_the_declared_defaults_when_the_cli_passes_nothing() -> None:
    defaults = {f.name: f.default for f in dataclasses.fields(BuildRequest) if f.name not in NOT_OPTIONS and f.name != "out"}
    assert defaults == dict(REQUEST_DEFAULTS)
    assert REQUEST_DEFAULTS["max_batch_size"] == 8 and REQUEST_DEFAULTS["check_parity"] is True  # the documented defaults
    assert REQUEST_DEFAULTS["max_image_pixels"] == 89_478_485  # Pillow's own warning limit, as README and docs/security.md say


def test_check_request_fields_are_the_declared_check_options_when_compared() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(CheckRequest)}
    assert fields.pop("gpu") is None  # --gpu/--no-gpu: every command's one option (cli/options.gpu_option)
    assert fields.pop("http_header_forward_pattern") is None  # from --nvcf-assets, not an option of its own
    assert fields == dict(CHECK_DEFAULTS) and set(fields) == {o.dest for o in CHECK_OPTIONS}


def test_request_fields_negate_no_parity_when_the_flag_is_given() -> None:
    values = {o.dest: (True if o.kind == "flag" else o.default) for o in BUILD_OPTIONS}
    fields = request_fields(values)
    assert fields["check_parity"] is False and "skip_parity" not in fields and fields["force"] is True


def test_every_shared_option_is_declared_per_family_when_a_family_reads_it() -> None:
    assert set(SHARED_OPTIONS) == {"labels", "top_k"}
    for family in FAMILIES.values():
        assert set(family.shared_options) <= set(SHARED_OPTIONS), family.command


def test_readme_build_section_names_every_build_option_when_read() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("# Build a complete repository"): text.index("# build ends with")]
    missing = [o.flags[0] for o in BUILD_OPTIONS + CHECK_OPTIONS if not re.search(re.escape(o.flags[0]) + r"\b", section)]
    assert missing == []


def test_max_batch_size_default_is_written_once_when_the_package_is_searched() -> None:
    """spec.DEFAULT_MAX_BATCH_SIZE is the one place; settings, the request, the recipe and both CLIs use it."""
    import repo_builder
    from repo_builder.spec import DEFAULT_MAX_BATCH_SIZE

    package = Path(repo_builder.__file__).resolve().parent
    literal = re.compile(r"""max_batch_size\b[^=\n]*=\s*8\b|["']max_batch_size["'],\s*8\b|--max-batch-size["'].*default=8\b""")
    found = [f"{p.relative_to(package)}:{n}" for p in package.rglob("*.py") for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if literal.search(line)]
    assert found == []
    assert literal.search("    max_batch_size: int = 8") and literal.search('data.get("max_batch_size", 8)')  # the search can fail
    assert DEFAULT_MAX_BATCH_SIZE == 8 and REQUEST_DEFAULTS["max_batch_size"] == DEFAULT_MAX_BATCH_SIZE
