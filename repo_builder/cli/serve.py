"""``repo-builder serve PATH|URL``: run a real tritonserver on the repository in the foreground.

The library does the work (``repo_builder.triton.serving.serve``); this parses options, prints one line
per model as it loads, the table of models, the endpoints and a "ready" line (only once every model is
loaded), then serves until Ctrl-C or SIGTERM, which stop the server and everything it started. A model that
does not load refuses the start (the table, then one error line, exit 1) unless --allow-unavailable.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import click

from repo_builder.cli.options import Output, log_options
from repo_builder.errors import UserError
from repo_builder.nvcf import FORWARD_PATTERN, check_forward_pattern
from repo_builder.signals import interrupt_on_termination
from repo_builder.store.urls import is_remote
from repo_builder.triton.arguments import ServerOptions
from repo_builder.triton.ports import check_distinct_ports, check_host
from repo_builder.triton.serving import ModelRow, ModelsNotReady, ServeSettings, serve


def format_table(rows: tuple[ModelRow, ...] | list[ModelRow]) -> str:
    """A plain aligned table: MODEL, VERSION, STATE, REASON."""
    header = ("MODEL", "VERSION", "STATE", "REASON")
    all_rows = [header, *((r.name, r.version, r.state, r.reason) for r in rows)]
    widths = [max(len(r[i]) for r in all_rows) for i in range(3)]
    lines = []
    for r in all_rows:
        cells = [r[i].ljust(widths[i]) for i in range(3)]
        lines.append("  ".join([*cells, r[3]]).rstrip())
    return "\n".join(lines)


def nvcf_forward_pattern(nvcf: bool, pattern: str | None) -> str | None:
    """``--nvcf`` means NVCF's forward pattern; a different explicit pattern beside it is a contradiction."""
    pattern = check_forward_pattern(pattern)
    if not nvcf:
        return pattern
    if pattern is not None and pattern != FORWARD_PATTERN:
        raise UserError(f"--nvcf forwards '{FORWARD_PATTERN}'; drop --http-header-forward-pattern '{pattern}' or --nvcf")
    return FORWARD_PATTERN


def _host(ctx: click.Context, param: click.Parameter, value: str) -> str:
    return check_host(value)  # a UserError: one line, exit 2


def _seconds(ctx: click.Context, param: click.Parameter, value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise UserError(f"--{str(param.name).replace('_', '-')} {value:g}: give a positive number of seconds")
    return value


@click.command("serve")
@click.argument("path")
@click.option("--grpc-port", type=click.IntRange(1, 65535), help="gRPC port (default: a free one).")
@click.option("--http-port", type=click.IntRange(1, 65535), help="HTTP port (default: a free one).")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Metrics port (default: a free one).")
@click.option(
    "--model-control-mode",
    type=click.Choice(["explicit", "poll", "none"]),
    default="explicit",
    show_default=True,
    help="explicit: load every model folder at start (a hung load is cut short and reported); "
    "poll: the server loads all and reloads on change; none: the server loads all once.",
)
@click.option("--poll-seconds", type=click.IntRange(1), default=5, show_default=True, help="Poll mode: seconds between polls.")
@click.option("--http-header-forward-pattern", help="Passed to tritonserver (NVCF deployments forward headers).")
@click.option("--nvcf", is_flag=True, help="Serve as on NVIDIA Cloud Functions: forward the NVCF-* headers (--http-header-forward-pattern 'NVCF-.*'), "
              "which repositories built with --nvcf-assets read.")
@click.option("--tritonserver", "tritonserver", help="tritonserver binary to run (default: on PATH, else the embedded one).")
@click.option("--host", default="127.0.0.1", show_default=True, callback=_host, help="Address the endpoints listen on.")
@click.option("--load-timeout", type=float, default=60.0, show_default=True, callback=_seconds, help="Seconds the models may take to load.")
@click.option("--startup-timeout", type=float, default=60.0, show_default=True, callback=_seconds, help="Seconds until the server answers.")
@click.option("--strict", is_flag=True, help="Run with --disable-auto-complete-config.")
@click.option("--keep-log", type=click.Path(dir_okay=False, path_type=Path), help="Keep the server log at this path.")
@click.option(
    "--ready-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the endpoints here once every model is loaded (removed on exit; none if the start is refused).",
)
@click.option(
    "--allow-unavailable",
    is_flag=True,
    help="Serve the models that load and list the rest, instead of refusing to start (exit 1); "
    "the ready file then means \"the models that could load are loaded\".",
)
@log_options
def command(
    path: str,
    grpc_port: int | None,
    http_port: int | None,
    metrics_port: int | None,
    model_control_mode: str,
    poll_seconds: int,
    http_header_forward_pattern: str | None,
    nvcf: bool,
    tritonserver: str | None,
    host: str,
    load_timeout: float,
    startup_timeout: float,
    strict: bool,
    keep_log: Path | None,
    ready_file: Path | None,
    allow_unavailable: bool,
    output: Output,
) -> int:
    """Serve the model repository PATH (a folder, or s3://bucket/prefix read by Triton) until Ctrl-C.

    Runs the repository's code (model.py files) in a real tritonserver. AWS_* variables and
    AWS_ENDPOINT_URL are passed to the server for s3:// repositories.
    """
    check_distinct_ports({"--grpc-port": grpc_port, "--http-port": http_port, "--metrics-port": metrics_port})
    http_header_forward_pattern = nvcf_forward_pattern(nvcf, http_header_forward_pattern)
    options = ServerOptions(
        mode=model_control_mode,
        tritonserver=tritonserver,
        host=host,
        grpc_port=grpc_port,
        http_port=http_port,
        metrics_port=metrics_port,
        startup_timeout=startup_timeout,
        strict=strict,
        poll_seconds=poll_seconds,
        http_header_forward_pattern=http_header_forward_pattern,
    )
    settings = ServeSettings(
        options, load_timeout=load_timeout, keep_log=keep_log, ready_file=ready_file, allow_unavailable=allow_unavailable
    )
    location: Path | str = path if is_remote(path) else Path(path)

    progress = output.progress  # one line per model as it loads (none under -q)

    try:
        with interrupt_on_termination(), serve(location, settings, progress) as serving:
            server = serving.server
            click.echo(f"tritonserver started (pid {server.pid})", err=True)
            click.echo(format_table(serving.rows))
            click.echo("")
            click.echo(f"gRPC     {server.grpc_url}")
            click.echo(f"HTTP     {server.http_url}")
            click.echo(f"metrics  {server.metrics_url}")
            click.echo(f"log      {server.log_path}")
            if http_header_forward_pattern:
                click.echo(f"headers  forwarded to models: --http-header-forward-pattern '{http_header_forward_pattern}'", err=True)
            click.echo("ready; press Ctrl-C to stop", err=True)
            while True:
                server.check_alive()  # raises with the log's tail if it dies under us
                time.sleep(0.5)
    except ModelsNotReady as exc:
        click.echo(format_table(exc.rows))  # each model's reason; the error line (main) names what to do
        raise
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
        return 0
