"""Click options more than one command takes, and the one way to bundle options into a decorator.

Not a command module (``main.COMMANDS`` names those); light imports only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from repo_builder.errors import UserError
from repo_builder.fsutil import write_text_atomic
from repo_builder.redact import redact
from repo_builder.safe_paths import ReportWrite, report_write, write_in_place

F = TypeVar("F", bound=Callable[..., Any])


def option_group(*options: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator applying ``options`` as if stacked above the function in this order (as ``--help`` lists them)."""

    def apply(func: F) -> F:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


# Building a TensorRT plan: `compile` and `compile-pending`.
device_option = click.option("--device", type=click.IntRange(min=0), default=0, show_default=True, help="GPU index to build on.")


# The output options every command shares (issue 11): `--format text|json`, `-q/--quiet`, `-v/--verbose`.
# `-v` also makes cli/main.py print the traceback of an internal error.
format_option = click.option(
    "--format",
    "output_format",
    type=click.Choice(("text", "json")),
    default="text",
    show_default=True,
    help="text for people; json: one JSON document on stdout (progress stays on stderr).",
)
quiet_option = click.option("-q", "--quiet", is_flag=True, help="Print only problems and the result: no progress.")
verbose_option = click.option(
    "-v", "--verbose", is_flag=True, help="Print more detail, and the traceback of an internal error."
)


@dataclass(frozen=True)
class Output:
    """The shared output options as one value: what a command prints and how."""

    format: str = "text"
    quiet: bool = False
    verbose: bool = False
    path: Path | None = None  # --output FILE: the report goes there instead of stdout

    def report(self, text: str) -> None:
        """The command's report: to ``--output`` (written whole, atomically) or stdout."""
        if self.path is None:
            click.echo(text)
            return
        text = text if text.endswith("\n") else text + "\n"
        try:
            # The one rule for report files (safe_paths): a regular file is replaced atomically, a
            # /dev/stdout-like target written in place, a link, FIFO or device refused.
            if report_write(self.path, "--output") is ReportWrite.IN_PLACE:
                write_in_place(self.path, text)
            else:
                write_text_atomic(self.path, text)
        except OSError as exc:
            raise UserError(f"--output {self.path}: cannot write the report ({exc.strerror or exc})") from None

    @property
    def json(self) -> bool:
        return self.format == "json"

    def progress(self, message: str) -> None:
        """A line for someone waiting: on stderr (stdout stays machine-readable), none under ``-q``."""
        if not self.quiet:
            click.echo(redact(message), err=True)

    def detail(self, message: str) -> None:
        """A line only ``-v`` asks for, on stderr."""
        if self.verbose:
            click.echo(redact(message), err=True)


def check_quiet_verbose(quiet: bool, verbose: bool) -> None:
    if quiet and verbose:
        raise click.UsageError("-q/--quiet and -v/--verbose exclude each other")


def check_output_file(path: Path | None) -> None:
    """``--output FILE``: refused at once when it is a folder or its folder does not exist."""
    if path is None:
        return
    report_write(path, "--output")  # a link, FIFO, device or folder: refused now, before any work
    if path.is_dir():
        raise UserError(f"--output {path}: is a folder; give a file name for the report")
    if not path.absolute().parent.is_dir():
        raise UserError(f"--output {path}: the folder {path.absolute().parent} does not exist")


output_file_option = click.option(
    "--output",
    "output_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Write the report to FILE instead of standard output.",
)


def output_options(func: F) -> F:
    """Add ``--format text|json``, ``--output FILE``, ``-q/--quiet`` and ``-v/--verbose`` to a click
    command; the command receives them as one keyword argument ``output: Output``::

        @click.command("x")
        @output_options
        def command(..., output: Output) -> int:
            output.progress("working ...")
            output.report(text)  # stdout, or --output FILE
    """

    @functools.wraps(func)
    def wrapper(*args: Any, output_format: str, output_path: Path | None, quiet: bool, verbose: bool, **kwargs: Any) -> Any:
        check_quiet_verbose(quiet, verbose)
        check_output_file(output_path)
        return func(*args, output=Output(output_format, quiet, verbose, output_path), **kwargs)

    # The command click sees takes the options instead of ``output``: not an F, by design.
    return option_group(format_option, output_file_option, quiet_option, verbose_option)(wrapper)  # type: ignore[return-value]


def log_options(func: F) -> F:
    """``-q/--quiet`` and ``-v/--verbose`` for a command that writes no report; it receives ``output: Output``."""

    @functools.wraps(func)
    def wrapper(*args: Any, quiet: bool, verbose: bool, **kwargs: Any) -> Any:
        check_quiet_verbose(quiet, verbose)
        return func(*args, output=Output("text", quiet, verbose), **kwargs)

    return option_group(quiet_option, verbose_option)(wrapper)  # type: ignore[return-value]


# --gpu/--no-gpu: one rule in every command that judges a deploy target (validate, build, publish, pull):
# the target is a GPU server unless --no-gpu says a CPU fleet. Never this machine's GPUs: a verdict must
# not depend on where it runs (--live proves what this machine can load, and says what it cannot).
GPU_HELP = "Deploy target: a GPU server (the default) or, with --no-gpu, a CPU fleet (KIND_GPU instances do not load)."
load_generator_options = option_group(
    click.option("--load-generator", type=click.Choice(["auto", "perf_analyzer", "python"]), default="auto", show_default=True,
                 help="Who sends the requests: perf_analyzer (PyPI perf-analyzer, Triton's C++ client) or the Python gRPC client; "
                      "auto: perf_analyzer when it runs here, else Python with a note saying why."),
    click.option("--perf-analyzer", "perf_analyzer", type=click.Path(path_type=Path, dir_okay=False), default=None,
                 help="The perf_analyzer binary [default: $REPO_BUILDER_PERF_ANALYZER, the perf-analyzer package, PATH]."),
)

gpu_option = click.option("--gpu/--no-gpu", "gpu", default=None, help=GPU_HELP)


def target_line(gpu: bool | None) -> str:
    """What the output says about the target, and why: ``target: GPU server (the default; --no-gpu for a CPU fleet)``."""
    if gpu is None:
        return "target: GPU server (the default; --no-gpu for a CPU fleet)"
    return "target: GPU server (--gpu)" if gpu else "target: CPU fleet (--no-gpu)"


# The S3 endpoint, named as the AWS CLI names it; validate's old --s3-endpoint stays as a hidden alias.
ENDPOINT_HELP = "S3-compatible endpoint (MinIO ...) for s3:// URLs [default: $AWS_ENDPOINT_URL]."


def endpoint_options(func: F) -> F:
    """``--endpoint-url URL`` (and the hidden alias ``--s3-endpoint``); the command receives ``endpoint_url``."""

    @functools.wraps(func)
    def wrapper(*args: Any, endpoint_url: str | None, s3_endpoint: str | None, **kwargs: Any) -> Any:
        if s3_endpoint is not None and endpoint_url is not None and s3_endpoint != endpoint_url:
            raise click.UsageError("--s3-endpoint is the old name of --endpoint-url: give one of them")
        return func(*args, endpoint_url=endpoint_url if endpoint_url is not None else s3_endpoint, **kwargs)

    return option_group(
        click.option("--endpoint-url", metavar="URL", default=None, help=ENDPOINT_HELP),
        click.option("--s3-endpoint", metavar="URL", default=None, hidden=True, help="Old name of --endpoint-url."),
    )(wrapper)  # type: ignore[return-value]


# Object store traffic (validate s3://, publish, pull): one deadline for the whole command (issue 20).
timeout_option = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=900.0,
    show_default=True,
    metavar="SECONDS",
    help="Give up on the object store after this long in total (retries and hanging calls included).",
)


def family_option(option: Any) -> Callable[[F], F]:
    """A family's ``FamilyOption`` (pipelines/family.py) as a click option; the family declares it as data."""
    if option.kind == "flag":
        return click.option(*option.flags, option.dest, is_flag=True, help=option.help)
    kinds: dict[str, Any] = {"text": str, "path": click.Path(path_type=Path), "int": int, "float": float}
    kind = click.Choice(option.choices) if option.kind == "choice" else kinds[option.kind]
    return click.option(*option.flags, option.dest, type=kind, default=option.default, required=option.required,
                        show_default=option.default is not None, metavar=option.metavar, help=option.help)
