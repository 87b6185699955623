"""The ``repo-builder`` command group. Subcommands are imported only when used, so
``repo-builder validate`` never pays for torch, TensorRT or the Triton launcher."""

from __future__ import annotations

import importlib
import sys

import click

from repo_builder import __version__
from repo_builder.errors import UserError

# command name -> module under repo_builder.cli defining a click command called ``command``
COMMANDS: dict[str, str] = {
    "validate": "validate",
    "export": "export",
    "compile": "compile",
    "compile-pending": "compile_pending",
    "build": "build",
    "serve": "serve",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        return importlib.import_module(f"repo_builder.cli.{module}").command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="repo-builder")
def cli() -> None:
    """Build Triton model repositories that load the first time, and prove it before deploy."""


def main(argv: list[str] | None = None) -> int:
    """Entry point: user mistakes become one line on stderr and exit 2, never a traceback."""
    try:
        # With standalone_mode=False click hands back the command's return value: its exit code.
        rv = cli.main(args=argv, prog_name="repo-builder", standalone_mode=False)
    except UserError as exc:
        click.echo(f"error: {exc}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
