"""``repo-builder serve PATH``: run a real tritonserver on the repository in the foreground.

Prints each model's state (and the server's reason for any it refused) and the endpoints, then serves
until Ctrl-C or SIGTERM, and stops the server and everything it started.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from repo_builder.errors import UserError

if TYPE_CHECKING:
    from repo_builder.triton.server import TritonServer


class _Stop(Exception):
    """Raised in the main thread by the SIGTERM handler."""


@contextmanager
def _stop_on_sigterm() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Stop

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def format_table(rows: list[tuple[str, str, str, str]]) -> str:
    """A plain aligned table: MODEL, VERSION, STATE, REASON."""
    header = ("MODEL", "VERSION", "STATE", "REASON")
    all_rows = [header, *rows]
    widths = [max(len(r[i]) for r in all_rows) for i in range(3)]
    lines = []
    for r in all_rows:
        cells = [r[i].ljust(widths[i]) for i in range(3)]
        lines.append("  ".join([*cells, r[3]]).rstrip())
    return "\n".join(lines)


def model_rows(server: TritonServer, refusals: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """One row per model version the server knows; where it gives no reason, ours or its log's."""
    from repo_builder.validate.live import explain_refusal

    rows = []
    log_text = server.log_text()
    for state in server.models():
        reason = state.reason
        if not reason and state.state != "READY":
            reason = refusals.get(state.name) or explain_refusal(None, log_text, state.name)
        rows.append(
            (state.name, state.version or "-", state.state or "UNAVAILABLE", " ".join(reason.split()))
        )
    return rows


def wait_for_loading(server: TritonServer, timeout: float) -> None:
    """Poll/none modes: the endpoints answer before every model has finished loading."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(m.state in ("LOADING", "UNLOADING") for m in server.models()):
            return
        time.sleep(0.25)


def load_everything(server: TritonServer, repository: Path, load_timeout: float) -> dict[str, str]:
    """Explicit mode: load every model (members, then ensembles); return the reasons for refusals."""
    from repo_builder.validate.live import LiveSettings, judge_repository
    from repo_builder.validate.scan import scan_repository

    repo = scan_repository(repository)
    starts = server.pid
    verdicts = judge_repository(server, repo, LiveSettings(load_timeout=load_timeout, infer=False))
    if server.pid != starts:
        # A hung load forced a restart, which unloaded everything: load again what loaded before.
        for name, verdict in verdicts.items():
            if verdict.loaded:
                server.try_load(name, load_timeout)
    return {n: v.result.reason or "" for n, v in verdicts.items() if not v.loaded}


@click.command("serve")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--grpc-port", type=click.IntRange(1, 65535), help="gRPC port (default: a free one).")
@click.option("--http-port", type=click.IntRange(1, 65535), help="HTTP port (default: a free one).")
@click.option("--metrics-port", type=click.IntRange(1, 65535), help="Metrics port (default: a free one).")
@click.option(
    "--model-control-mode",
    type=click.Choice(["explicit", "poll", "none"]),
    default="explicit",
    show_default=True,
    help="explicit: load every model one by one (a hung load is reported and skipped); "
    "poll: the server loads all and reloads on change; none: the server loads all once.",
)
@click.option(
    "--http-header-forward-pattern", help="Passed to tritonserver (NVCF deployments forward headers)."
)
@click.option(
    "--tritonserver",
    "tritonserver",
    help="tritonserver binary to run (default: on PATH, else the embedded one).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address the endpoints listen on.")
@click.option(
    "--load-timeout", type=float, default=60.0, show_default=True, help="Seconds per model load (explicit)."
)
@click.option(
    "--startup-timeout", type=float, default=60.0, show_default=True, help="Seconds until the server answers."
)
@click.option("--strict", is_flag=True, help="Run with --disable-auto-complete-config.")
def command(
    path: Path,
    grpc_port: int | None,
    http_port: int | None,
    metrics_port: int | None,
    model_control_mode: str,
    http_header_forward_pattern: str | None,
    tritonserver: str | None,
    host: str,
    load_timeout: float,
    startup_timeout: float,
    strict: bool,
) -> int:
    """Serve the model repository PATH with a real tritonserver until Ctrl-C."""
    from repo_builder.triton.server import ServerOptions, start_server

    if not path.is_dir():
        raise UserError(f"{path}: no such folder; pass the model repository's path")
    options = ServerOptions(
        mode=model_control_mode,
        tritonserver=tritonserver,
        host=host,
        grpc_port=grpc_port,
        http_port=http_port,
        metrics_port=metrics_port,
        startup_timeout=startup_timeout,
        strict=strict,
        http_header_forward_pattern=http_header_forward_pattern,
    )
    try:
        with _stop_on_sigterm(), start_server(path, options) as server:
            click.echo(f"tritonserver started (pid {server.pid}), loading models ...", err=True)
            refusals: dict[str, str] = {}
            if model_control_mode == "explicit":
                refusals = load_everything(server, path, load_timeout)
            else:
                wait_for_loading(server, load_timeout)
            click.echo(format_table(model_rows(server, refusals)))
            click.echo("")
            click.echo(f"gRPC     {server.grpc_url}")
            click.echo(f"HTTP     {server.http_url}")
            click.echo(f"metrics  {server.metrics_url}")
            click.echo(f"log      {server.log_path}")
            click.echo("serving; press Ctrl-C to stop", err=True)
            while True:
                server.check_alive()  # raises with the log's tail if it dies under us
                time.sleep(0.5)
    except (KeyboardInterrupt, _Stop):
        click.echo("stopped", err=True)
        return 0
