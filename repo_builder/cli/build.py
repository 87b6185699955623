"""``repo-builder build FAMILY``: a complete, versioned Triton repository in one command.

The subcommands are the model families of repo_builder/pipelines/registry.py (one per record); this module
only turns options into a build request, calls the library, prints the summary and exits.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from repo_builder.cli.options import (
    Output,
    check_output_file,
    family_option,
    gpu_option,
    option_group,
    output_file_option,
    target_line,
)
from repo_builder.errors import UserError
from repo_builder.export.progress import Phases
from repo_builder.pipelines.build_check import CheckRequest
from repo_builder.pipelines.build_request import BuildOutcome, BuildRequest, build
from repo_builder.pipelines.nvcf_assets import gate_forward_pattern
from repo_builder.pipelines.registry import FAMILIES, Family, FamilyOption
from repo_builder.pipelines.request_options import BUILD_OPTIONS, CHECK_OPTIONS, request_fields

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    # Progress always goes to stderr, so with --format json stdout carries only the JSON summary.
    click.echo(message, err=True)



# The validation build ends with: the same flags as `repo-builder validate`, and build prints that command.
check_options = option_group(*(family_option(o) for o in CHECK_OPTIONS[:1]), gpu_option, *(family_option(o) for o in CHECK_OPTIONS[1:]))

output_options = option_group(
    click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
                 help='Summary format on stdout; json: {"repository", "ensemble", "models", "validation": {..., "command"}}.'),
    click.option("--json", "as_json", is_flag=True, hidden=True, help="Same as --format json (kept for old scripts)."),
    output_file_option,
    click.option("-q", "--quiet", is_flag=True, help="No progress lines; only the summary and errors."),
    click.option("-v", "--verbose", is_flag=True, help="Tracebacks for internal errors."),
)


def check_request(kwargs: dict[str, Any], params: Mapping[str, Any] | None = None) -> CheckRequest:
    return CheckRequest(gpu=kwargs["gpu"], http_header_forward_pattern=gate_forward_pattern(params or {}),
                        **request_fields(kwargs, CHECK_OPTIONS))


def build_request(chosen: Family, params: dict[str, Any], kwargs: dict[str, Any]) -> BuildRequest:
    return BuildRequest(family=chosen.command, params=params, check=check_request(kwargs, params), **request_fields(kwargs))


def _print_summary(built: BuildOutcome, output: Output, target: str) -> None:
    if output.json:
        output.report(json.dumps(built.to_json(), indent=2))
        return
    result, outcome = built.result, built.check
    models = ", ".join(f"{m.name}/{m.version} ({m.role})" for m in result.models)
    lines = [f"built {result.repository}: {models}"]
    if result.head == "untrained":
        lines.append("head: untrained (--new-head/--num-labels: the classification head has random weights; fine-tune before serving)")
    lines.append(f"clients call '{result.ensemble}'" + (" once compile-pending has built the plan" if result.pending_compile else ""))
    if result.target is not None:
        lines.append(f"built for: {result.target.describe()}")
        packages = result.packages
        if packages is not None and packages.image:
            pins = ", ".join(sorted(p.pin for p in packages.image))
            lines.append(f"needs an image built from {result.repository}/Dockerfile ({pins}); the stock image will not load it")
        elif packages is not None and packages.shipped:
            lines.append("ships: " + "; ".join(f"{name}: {', '.join(p.pin for p in shipped)}" for name, shipped in sorted(packages.shipped.items())))
    lines.append(f"validated with: {outcome.command} ({'passes' if outcome.ok else 'FAILS'}); {target}")
    output.report("\n".join(lines))


def run_build(chosen: Family, params: dict[str, Any], kwargs: dict[str, Any]) -> int:
    """Build, then validate as the printed command does; exit 1 when that validation fails."""
    output = Output("json" if kwargs["as_json"] else kwargs["fmt"], kwargs["quiet"], kwargs["verbose"], kwargs["output_path"])
    check_output_file(output.path)
    log = None if kwargs["quiet"] else _stderr
    phases = Phases(not kwargs["quiet"], write=_stderr)
    outcome = build(build_request(chosen, params, kwargs), log=log, phases=phases)
    _print_summary(outcome, output, target_line(kwargs["gpu"]))
    return 0 if outcome.ok else 1


def _unread_option(chosen: Family, option: FamilyOption) -> Callable[[Any], Any]:
    """A per-family shared option this family does not read: not in its --help, refused when given."""
    flag = option.flags[0]
    readers = ", ".join(f.command for f in FAMILIES.values() if option.dest in f.shared_options)

    def refuse(_ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        if value is not None:
            raise UserError(f"{flag}: build {chosen.command} does not read it (only {readers} do); drop {flag}")
        return option.default

    return click.option(*option.flags, option.dest, default=None, hidden=True, expose_value=True, callback=refuse)


def family_shared_options(chosen: Family) -> Callable[[Any], Any]:
    """The shared build options as ``chosen`` lists them: a ``per_family`` one only when it reads it."""
    return option_group(*(family_option(o) if not o.per_family or o.dest in chosen.shared_options else _unread_option(chosen, o)
                          for o in BUILD_OPTIONS))


def family_command(chosen: Family) -> click.Command:
    """The ``build <family>`` subcommand: the family's own options, --from-export, then the shared ones
    (those it reads: ``--top-k``/``--labels`` only for the families whose ``shared_options`` name them)."""
    own = {o.dest for o in chosen.options} | {"from_export"}

    def callback(**kwargs: Any) -> int:
        params = {key: kwargs.pop(key) for key in list(kwargs) if key in own}
        return run_build(chosen, params, kwargs)

    decorators = [
        *(family_option(o) for o in chosen.options),
        click.option("--from-export", type=click.Path(path_type=Path), default=None,
                     help=f"Build from an existing 'repo-builder export' folder ({chosen.task}) instead of exporting."),
        family_shared_options(chosen),
        check_options,
        output_options,
    ]
    callback.__doc__ = chosen.summary
    for decorate in reversed(decorators):
        callback = decorate(callback)
    return click.command(name=chosen.command, help=chosen.summary, short_help=chosen.short_help)(callback)


@click.group(name="build")
def command() -> None:
    """Build a Triton model repository: preprocessing, model, postprocessing and the ensemble clients call."""


for _family in FAMILIES.values():
    command.add_command(family_command(_family))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(command())
