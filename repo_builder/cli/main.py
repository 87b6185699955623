"""The ``repo-builder`` command group. Subcommands are imported only when used, so
``repo-builder validate`` never pays for torch, TensorRT or the Triton launcher."""

from __future__ import annotations

import contextlib
import errno
import importlib
import io
import os
import sys

import click

from repo_builder import __version__
from repo_builder.environment import environment_failure, silence_stdout
from repo_builder.errors import EXIT_INTERNAL, EXIT_TOOL, RepoBuilderError
from repo_builder.redact import redact
from repo_builder.signals import exit_with, interrupt_on_termination
from repo_builder.validate.reporters.formatting import clean

# command name -> module under repo_builder.cli defining a click command called ``command``
COMMANDS: dict[str, str] = {
    "validate": "validate",
    "export": "export",
    "compile": "compile",
    "compile-pending": "compile_pending",
    "build": "build",
    "serve": "serve",
    "bench": "bench",
    "tune": "tune",
    "report": "report",
    "publish": "publish",
    "pull": "pull",
}


def one_line(text: str) -> str:
    """An error as one printable line: credentials redacted, then control characters, bidi overrides and
    newlines shown as escapes by the one escaping function every human-facing output uses."""
    return clean(redact(text))


# One line each in `repo-builder --help` (click would cut each docstring's first sentence with "...");
# read from here, so the list imports no command module. tests/cli/test_flag_vocabulary.py checks both.
SUMMARIES: dict[str, str] = {
    "validate": "Check a model repository as Triton would load it.",
    "export": "Export a model to ONNX with a signature.json.",
    "compile": "Build a TensorRT plan from an ONNX file.",
    "compile-pending": "Build a repository's pending TensorRT plans.",
    "build": "Build a complete, validated model repository.",
    "serve": "Serve a model repository on the embedded Triton.",
    "bench": "Measure throughput and latency of a repository.",
    "publish": "Upload a repository to object storage.",
    "pull": "Download a repository from object storage.",
    "tune": "Search a pipeline's instances, threads and batching.",
    "report": "Draw bench and tune results as an HTML page.",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SUMMARIES.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        return importlib.import_module(f"repo_builder.cli.{module}").command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="repo-builder")
def cli() -> None:
    """Build Triton model repositories that load the first time, and prove it before deploy."""


def _verbose(argv: list[str]) -> bool:
    """``-v``/``--verbose`` anywhere on the command line, or REPO_BUILDER_DEBUG=1: show tracebacks."""
    return bool(os.environ.get("REPO_BUILDER_DEBUG")) or any(a in ("-v", "--verbose", "-vv") for a in argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point: every error root becomes one line on stderr and its own exit code (errors.py);
    a bug is reported as one, with its traceback only under ``-v``. SIGTERM is Ctrl-C for every
    command (``repo_builder/signals.py``): both exit 130 after the command's cleanup."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        # With standalone_mode=False click hands back the command's return value: its exit code.
        with interrupt_on_termination():
            rv = cli.main(args=args, prog_name="repo-builder", standalone_mode=False)
    except RepoBuilderError as exc:
        if exc.exit_code == EXIT_INTERNAL:
            return _internal(exc, args)
        # One line: control characters in names and content shown escaped (formatting.clean, the one
        # escaping function), credentials redacted.
        _echo_error(f"error: {one_line(str(exc))}")
        return exc.exit_code
    except click.exceptions.Abort as exc:
        # click turns Ctrl-C (and SIGTERM, through signals.py) into Abort: say what happened.
        click.echo("interrupted" if isinstance(exc.__context__, KeyboardInterrupt) else "aborted", err=True)
        return 130
    except click.ClickException as exc:
        shown = io.StringIO()
        exc.show(file=shown)  # click quotes argv back: a URL's credentials must not be among it
        click.echo(redact(shown.getvalue()), err=True, nl=False)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except SystemExit:
        # click ends a command whose output pipe closed (EPIPE) with exit 1, silently, after wrapping
        # stdout to hush the final flush: that 1 would read as "refused". It is the environment's.
        if type(sys.stdout).__name__ == "_PacifyFlushWrapper":
            return _failed(BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE)), args)
        raise
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except Exception as exc:  # the last line of defence: the machine's failure, else a bug
        return _failed(exc, args)
    return rv if isinstance(rv, int) else 0


def _echo_error(text: str) -> None:
    """One line on stderr that its encoding can hold (a latin-1 console gets backslash escapes, not exit 3)."""
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    click.echo(text.encode(encoding, "backslashreplace").decode(encoding, "replace"), err=True)


def _failed(exc: BaseException, args: list[str]) -> int:
    """A full disk, a size limit, a closed pipe, a long path, an output encoding, a permission: the
    environment's failure (exit 3, one sentence); anything else is a bug (exit 4)."""
    sentence = environment_failure(exc)
    if sentence is None:
        return _internal(exc, args)
    if isinstance(exc, OSError) and exc.filename is None:
        silence_stdout()  # a stream failed (stdout?): its buffered rest must not fail again at exit
    if _verbose(args):
        _print_traceback(exc)
    with contextlib.suppress(OSError, UnicodeError):  # stderr gone too: the exit code says it
        click.echo(f"error: {one_line(sentence)}", err=True)
    return EXIT_TOOL


def _print_traceback(exc: BaseException) -> None:
    import traceback  # stdlib, but ~3 ms with linecache and tokenize: only -v on a failure needs it

    traceback.print_exception(exc)


def _internal(exc: BaseException, args: list[str]) -> int:
    if _verbose(args):
        _print_traceback(exc)
    click.echo(
        one_line(f"internal error: {type(exc).__name__}: {exc}".splitlines()[0])
        + " -- this is a bug in repo-builder; please report it (run again with -v for the traceback)",
        err=True,
    )
    return EXIT_INTERNAL


def run() -> None:
    """The process entry (console script, ``python -m repo_builder``): ``main()`` with the signal
    handlers held until the exit (``signals.exit_with``); tests and library callers call ``main()``."""
    exit_with(main)


if __name__ == "__main__":
    run()
