"""``repo-builder validate PATH``: what Triton will refuse in a model repository, before deploy.

Parses options, calls ``validate_location`` (``validate_live_location`` under ``--live``, the only time the
live machinery is imported), renders through the reporter registry, writes, exits.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import click

from repo_builder.cli.options import (
    Output,
    check_quiet_verbose,
    endpoint_options,
    gpu_option,
    quiet_option,
    verbose_option,
)
from repo_builder.deploy_target import PLATFORMS
from repo_builder.environment import environment_failure
from repo_builder.errors import ToolError, UserError
from repo_builder.fsutil import write_text_atomic
from repo_builder.safe_paths import ReportWrite, report_write, write_in_place
from repo_builder.store.deadline import store_deadline
from repo_builder.store.urls import is_remote
from repo_builder.tensorrt_releases import known_releases
from repo_builder.validate.live_codes import DEFAULT_LOAD_TIMEOUT
from repo_builder.validate.location import validate_location, validate_options
from repo_builder.validate.records import Severity
from repo_builder.validate.report import Report
from repo_builder.validate.reporters import FORMATS, REPORTERS, RenderSettings, render_report
from repo_builder.validate.reporters.formatting import summary_line
from repo_builder.validate.rule_config import RuleChoice, resolve_rule_config
from repo_builder.validate.suppress import apply_rule_config, needs_reason


@dataclass(frozen=True)
class ReportTarget:
    """One ``--format NAME[=PATH]``: where one rendering of the report goes (``path`` None: stdout)."""

    fmt: str
    path: Path | None = None


def parse_format(value: str) -> ReportTarget:
    """``json`` or ``sarif=out/results.sarif``; the name must be a registered reporter."""
    name, sep, path = value.partition("=")
    name = name.strip().lower()
    if name not in REPORTERS:
        raise click.BadParameter(f"'{name}' is not a report format (choose from {', '.join(FORMATS)})")
    if sep and not path:
        raise click.BadParameter(f"'{value}': give a file after '=' (e.g. {name}=out/report.{name})")
    return ReportTarget(name, Path(path) if sep else None)


def _formats_callback(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[ReportTarget, ...]:
    return tuple(parse_format(v) for v in values) or (ReportTarget("text"),)


def report_targets(targets: tuple[ReportTarget, ...], output: Path | None) -> tuple[ReportTarget, ...]:
    """Resolve ``--output`` (the file for the one format without ``=PATH``) and refuse ambiguous plans."""
    to_stdout = [t for t in targets if t.path is None]
    if len(to_stdout) > 1:
        raise click.UsageError("only one --format can go to standard output; give the others a file: --format NAME=PATH")
    if output is not None:
        if not to_stdout:
            raise click.UsageError("--output names the file of the --format given without =PATH; there is none")
        targets = tuple(ReportTarget(t.fmt, output) if t.path is None else t for t in targets)
    paths = [t.path.absolute() for t in targets if t.path is not None]
    if len(paths) != len(set(paths)):
        raise click.UsageError("two --format options write the same file")
    return targets


def prepare_report_file(path: Path) -> None:
    """Create the report's folder and check it can be written, before any long validation runs."""
    if path.is_dir():
        raise UserError(f"{path}: is a folder; give a file name for the report")
    if report_write(path, "--output/--format") is ReportWrite.IN_PLACE:
        return  # /dev/stdout and its kind: nothing to create
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{path}: cannot create the folder {path.parent} ({exc.strerror or exc})") from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise UserError(f"{path}: cannot write into the folder {path.parent} (permission denied); choose another path")


def write_report_file(path: Path, text: str) -> None:
    try:
        if report_write(path, "--output/--format") is ReportWrite.IN_PLACE:
            write_in_place(path, text)
        else:
            write_text_atomic(path, text)
    except OSError as exc:
        sentence = environment_failure(OSError(exc.errno, exc.strerror, str(path)))
        if sentence is not None:  # a full disk, a size limit: the machine's, exit 3
            raise ToolError(f"cannot write the report: {sentence}") from None
        raise UserError(f"{path}: cannot write the report ({exc.strerror or exc}); choose another path") from None


def printable(text: str, encoding: str | None, fmt: str = "text") -> str:
    """``text`` as a stream of ``encoding`` can carry it: what the encoding cannot represent becomes an
    escape (``\\u20ac`` in text, ``&#8364;`` in XML; JSON and SARIF are ASCII already), so a latin-1
    terminal still gets the verdict, and the exit code stays the verdict's."""
    try:
        text.encode(encoding or "utf-8")
        return text
    except LookupError:  # an encoding Python does not know: leave it to the stream
        return text
    except UnicodeEncodeError:
        pass
    if fmt == "junit":  # character references are XML's own escapes, valid whatever the declared encoding
        return text.encode("ascii", "xmlcharrefreplace").decode("ascii")
    return text.encode(encoding or "utf-8", "backslashreplace").decode(encoding or "utf-8")


def echo(text: str, *, err: bool = False, fmt: str = "text", nl: bool = True) -> None:
    """``click.echo`` of ``text`` escaped for the stream's encoding (``printable``)."""
    stream = sys.stderr if err else sys.stdout
    click.echo(printable(text, getattr(stream, "encoding", None), fmt), err=err, nl=nl)


def emit(report: Report, targets: tuple[ReportTarget, ...], settings: RenderSettings) -> None:
    """Render each target; stdout gets colour on a terminal; with every report in files, stderr gets the
    summary line (unless quiet)."""
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    for target in targets:
        if target.path is None:
            colored = replace(settings, color=color and target.fmt == "text")
            echo(render_report(report, target.fmt, settings=colored), fmt=target.fmt, nl=False)
        else:
            write_report_file(target.path, render_report(report, target.fmt, settings=settings))
    if all(t.path is not None for t in targets) and not settings.quiet:
        echo(summary_line(report, settings.fail_on), err=True)


MAX_PATH_BYTES = 4096  # Linux's PATH_MAX: a longer path fails in every call that takes it
MAX_NAME_BYTES = 255  # NAME_MAX: one folder or file name


def check_repository_path(path: str) -> None:
    """A local repository path the system cannot take (over 4,096 bytes, or a name over 255) is the
    user's mistake, said in one line before anything is read, not a failure of the machine (exit 3)."""
    if is_remote(path):
        return
    raw = os.fsencode(path)
    longest = max((len(part) for part in raw.split(b"/")), default=0)
    if len(raw) <= MAX_PATH_BYTES and longest <= MAX_NAME_BYTES:
        return
    shown = path if len(path) <= 80 else f"{path[:40]}…{path[-40:]}"
    what = f"{len(raw):,} bytes long (at most {MAX_PATH_BYTES:,})" if len(raw) > MAX_PATH_BYTES else (
        f"holds a name of {longest:,} bytes (at most {MAX_NAME_BYTES})"
    )
    raise UserError(f"{shown}: the repository path is {what}; pass a shorter path (e.g. run from a folder closer to it)")


def _check_live_options(live: bool, tritonserver: str | None, load_timeout: float, allow_unproven: bool, inputs: tuple[str, ...]) -> None:
    if not live and (tritonserver is not None or load_timeout != DEFAULT_LOAD_TIMEOUT or allow_unproven or inputs):
        raise click.UsageError("--tritonserver, --load-timeout, --allow-unproven and --input only apply with --live")
    if load_timeout <= 0:
        raise click.UsageError("--load-timeout must be positive")


# A CI gate against a store that accepts connections and never answers must end (exit 3) within a minute;
# publish and pull keep 900 s (cli/options.py), since they move whole repositories.
VALIDATE_STORE_TIMEOUT = 45.0

_FORMAT_HELP = "Report format [default: text to stdout]; repeatable: NAME=PATH writes that format to a file (folders are created). " + "; ".join(
    f"{r.name}: {r.description}" for r in REPORTERS.values()
)


@click.command("validate")
@click.argument("path")
@click.option("--format", "formats", multiple=True, metavar="FORMAT[=PATH]", callback=_formats_callback, help=_FORMAT_HELP)
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), help="Write the report given without =PATH to this file.")
@click.option("--strict", is_flag=True, help="Judge as Triton with --disable-auto-complete-config: configs must be complete.")
@click.option(
    "--fail-on",
    type=click.Choice(("error", "warning")),
    default="error",
    show_default=True,
    help="Exit 1 on errors only, or on warnings too (the reports' verdict follows).",
)
@click.option(
    "--triton-release",
    metavar="YY.MM",
    help=f"Target Triton release (e.g. 24.08; known: {known_releases()}) for TensorRT version checks, and the "
    "stock image nvcr.io/nvidia/tritonserver:YY.MM-py3 whose Python judges Python steps' imports and shipped "
    "packages [default: the release repo-builder.json records, else none judged; the report says which].",
)
@click.option(
    "--platform",
    type=click.Choice(PLATFORMS),
    help="The deploy target's CPU platform: shipped packages must be built for it [default: the one "
    "repo-builder.json records, else x86_64].",
)
@click.option(
    "--tensorrt-version",
    metavar="X.Y.Z",
    help="The TensorRT version plans must match (wins over --triton-release; for releases not in the table).",
)
@click.option("--allow-pending", is_flag=True, help="TensorRT plans still to be compiled are warnings, not errors.")
@click.option(
    "--strict-manifest",
    is_flag=True,
    help="Every file changed since build (RB002) is an error, not only those Triton or a step reads to load "
    "and answer (a README.md removed from an ensemble's version folder is otherwise a warning).",
)
@gpu_option
@click.option(
    "--live",
    is_flag=True,
    help="Also load every model in a real tritonserver (runs the repository's code) and send each ensemble one "
    "request: --input files, else its family's real sample (repositories repo-builder built), else synthesized "
    "inputs. A failed real request is an error; a failed synthesized one a warning ('not proven': gate on it "
    "with --fail-on warning).",
)
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="[MODEL:]NAME=FILE",
    help="--live: send FILE's bytes as input NAME of ensemble MODEL (default: every ensemble with that input), "
    "as bench --input does; repeat for more rows (a .npy file gives a numeric input's array).",
)
@click.option(
    "--gpus",
    type=click.IntRange(min=0),
    metavar="N",
    help="The deploy target's GPU count: `gpus: [ids]` are judged against 0..N-1 [default: unknown].",
)
@click.option(
    "--http-header-forward-pattern",
    metavar="REGEX",
    help="The target tritonserver's --http-header-forward-pattern [default: none forwarded]; NVCF runs 'NVCF-.*'. "
    "Steps built with --nvcf-assets warn (RB801) when their headers are not forwarded.",
)
@click.option("--tritonserver", metavar="PATH", help="tritonserver binary for --live [default: the one PyTriton ships].")
@click.option(
    "--load-timeout",
    type=float,
    default=DEFAULT_LOAD_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="Per-model load timeout for --live.",
)
@click.option("--allow-unproven", is_flag=True, help="--live: models this server cannot load here do not fail the run.")
@endpoint_options
@click.option(
    "--max-download",
    type=click.IntRange(min=0),
    default=16,
    show_default=True,
    metavar="MB",
    help="For s3:// paths: largest ONNX file fetched to check its inputs and outputs.",
)
@click.option(
    "--select",
    multiple=True,
    metavar="CODES",
    help="Only these rules (codes, prefixes like RB3, or names; comma-separated). Findings that make Triton "
    "refuse a model are reported whatever is selected.",
)
@click.option(
    "--ignore",
    multiple=True,
    metavar="CODES",
    help="Set these findings aside (codes, prefixes or names; CODE:reason). Refusals need a reason and the "
    "report still says the model will not load. Set-aside findings stay in JSON/SARIF as suppressed.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Rule settings file [default: the nearest .repo-builder.toml or pyproject.toml "
    "[tool.repo-builder.validate] from the working folder up].",
)
@click.option("--isolated", is_flag=True, help="Ignore every configuration file.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=VALIDATE_STORE_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="For a repository in an object store: give up on the store after this long in total (retries and hanging calls "
    "included; exit 3). Sized for a CI gate; raise it for a large or slow store.",
)
@quiet_option
@verbose_option
def command(
    path: str,
    formats: tuple[ReportTarget, ...],
    output: Path | None,
    strict: bool,
    fail_on: str,
    triton_release: str | None,
    platform: str | None,
    tensorrt_version: str | None,
    allow_pending: bool,
    strict_manifest: bool,
    gpu: bool | None,
    gpus: int | None,
    http_header_forward_pattern: str | None,
    live: bool,
    tritonserver: str | None,
    load_timeout: float,
    allow_unproven: bool,
    inputs: tuple[str, ...],
    endpoint_url: str | None,
    max_download: int,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    config_file: Path | None,
    isolated: bool,
    timeout: float,
    quiet: bool,
    verbose: bool,
) -> int:
    """Check the Triton model repository PATH (a folder or s3://bucket/prefix) offline.

    Exit 0 when Triton would load everything, 1 when it would refuse something (or warnings with
    --fail-on warning), 2 for usage errors, 3 when a tool or the machine fails (e.g. --live's server).
    Under --live, an ensemble that fails a real request (or answers it wrongly) exits 1; one that only
    fails synthesized inputs is "not proven", a warning: add --fail-on warning to gate on it.
    """
    check_quiet_verbose(quiet, verbose)
    check_repository_path(path)
    _check_live_options(live, tritonserver, load_timeout, allow_unproven, inputs)
    live_run: Callable[..., Report] | None = None
    if live:
        # The live machinery (a server launcher, its gRPC client, numpy) is imported only under --live:
        # offline validate must not pay for it (tests/live/test_offline_imports.py).
        from repo_builder.live.location import live_settings, validate_live_location

        # --input files are checked here, before any report folder is made.
        settings = live_settings(tritonserver, load_timeout, strict, allow_unproven, endpoint_url, inputs)
        progress = Output(quiet=quiet).progress  # a line per model on stderr, none with -q
        live_run = partial(validate_live_location, live=settings, progress=progress)
    if gpus is not None and gpu is not None and gpu != (gpus > 0):
        raise click.UsageError(f"--gpus {gpus} contradicts --{'' if gpu else 'no-'}gpu; give one of them")
    options = validate_options(
        strict=strict,
        triton_release=triton_release,
        tensorrt_version=tensorrt_version,
        allow_pending=allow_pending,
        gpu=gpu,
        live=live,
        gpus=gpus,
        http_header_forward_pattern=http_header_forward_pattern,
        platform=platform,
    )
    options = replace(options, strict_manifest=strict_manifest)
    if isolated and config_file is not None:
        raise click.UsageError("--isolated ignores configuration files; drop --config or --isolated")
    rules = resolve_rule_config(RuleChoice(select=select, ignore=ignore, config=config_file, isolated=isolated))
    targets = report_targets(formats, output)
    for target in targets:
        if target.path is not None:
            prepare_report_file(target.path)
    with store_deadline(timeout):  # s3:// only: the mirror's store traffic
        judge = validate_location if live_run is None else live_run
        report = judge(path, options, s3_endpoint=endpoint_url, max_download_bytes=max_download << 20)
    report = apply_rule_config(report, rules)
    for pattern in () if quiet else needs_reason(report, rules):
        echo(
            f"note: --ignore {pattern} left its errors in place (Triton refuses those models); "
            f"to set them aside, give a reason: --ignore '{pattern}:why'",
            err=True,
        )
    render = RenderSettings(fail_on=Severity(fail_on), quiet=quiet, verbose=verbose)
    emit(report, targets, render)
    return report.exit_code(Severity(fail_on))
