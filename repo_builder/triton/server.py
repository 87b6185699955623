"""A real tritonserver on loopback for as long as a ``with`` block lasts, and a client facade to it.

    from repo_builder.triton import start_server

    with start_server(Path("repo")) as server:         # explicit mode, free ports, log captured
        server.load("ensemble")                          # raises ModelLoadError with the server's reason
        outputs = server.infer("ensemble", {"TEXT": np.array([[b"hi"]], dtype=object)})
        print(server.grpc_url, server.log_path)

    with start_server("s3://127.0.0.1:9000/bucket/repo", mode="poll"):  # Triton reads the bucket itself
        ...

The pieces live beside this module: ``arguments`` (options and command line), ``process`` (spawn, stop
the group), ``server_log`` (reading the log), ``stub_hang`` (the 2.51 hung-load workaround),
``client`` (gRPC calls); ``repo_builder.store.for_triton`` turns a store URL into what the server reads.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError
from repo_builder.signals import signals_deferred
from repo_builder.store.for_triton import remote_repository
from repo_builder.store.urls import is_remote
from repo_builder.triton.arguments import MODES, Endpoints, ServerOptions, server_arguments
from repo_builder.triton.client import (
    LoadOutcome,
    ModelState,
    connect,
    infer_model,
    repository_index,
    unload_model,
)
from repo_builder.triton.errors import ModelLoadError, ServerError
from repo_builder.triton.locate import (
    TritonInstall,
    check_numpy,
    locate_tritonserver,
    prepare_backends,
    server_environment,
)
from repo_builder.triton.ports import check_distinct_ports, check_host, free_port, port_in_use
from repo_builder.triton.process import answers, exit_description, remove_shared_memory, spawn, stop_group
from repo_builder.triton.server_log import log_size, log_tail, log_text
from repo_builder.triton.stub_hang import STUB_GRACE, failed_stubs, unsettled_models, watch_load

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "MODES",
    "ModelLoadError",
    "ServerError",
    "ServerOptions",
    "StartupHang",
    "StartupTimeout",
    "TritonServer",
    "free_port",
    "port_in_use",
    "start_server",
]

_PORT_IN_USE = ("already in use", "address already in use")


class StartupHang(ServerError):
    """Models loaded at start that will not settle: a failed Python stub (Triton 2.51 then never
    finishes starting) or, for ``StartupTimeout``, still loading when the start-up time ran out."""

    def __init__(self, message: str, models: frozenset[str], log_path: Path | None = None) -> None:
        super().__init__(message, log_path)
        self.models = models


class StartupTimeout(StartupHang):
    """The endpoints did not answer in time while the log shows ``models`` still loading."""


def _transport_failed(reason: str | None) -> bool:
    text = (reason or "").lower()
    return any(s in text for s in ("failed to connect", "connection reset", "socket closed", "unavailable:"))


def _pycache_dirs(repository: Path | str) -> set[Path]:
    if not isinstance(repository, Path) or not repository.is_dir():
        return set()
    return set(repository.rglob("__pycache__"))


def _resolve_repository(repository: Path | str, options: ServerOptions) -> tuple[Path | str, ServerOptions]:
    """Local folders resolved; remote URLs in Triton's form, with their environment added to ``options``."""
    if not is_remote(str(repository)):
        return Path(repository).resolve(), options
    remote = remote_repository(str(repository))
    return remote.url, replace(options, environment=(*remote.environment, *options.environment))


class TritonServer:
    """A tritonserver process and a gRPC client to it. Use ``start_server`` (or ``with`` on this)."""

    def __init__(self, repository: Path | str, options: ServerOptions | None = None) -> None:
        self.repository, self.options = _resolve_repository(repository, options or ServerOptions())
        check_host(self.options.host)
        self.process: subprocess.Popen[bytes] | None = None
        self.install: TritonInstall | None = None
        self.workdir: Path | None = None
        self.log_path: Path | None = None
        self.log_start = 0  # where the current start's part of the log begins
        self.grpc_port = self.http_port = self.metrics_port = 0
        self._backends: Path | None = None
        self._client: Any = None
        self._keep_log = self.options.log_path is not None
        self._starts = 0
        self._shm_prefix = ""
        self._pycache_before: set[Path] | None = None  # taken before the first start
        # Called while waiting for the endpoints (models given to load_models load then): progress lines.
        self.on_wait: Callable[[], None] | None = None

    # -- endpoints -----------------------------------------------------------------------------------
    @property
    def grpc_url(self) -> str:
        """``host:port`` as ``tritonclient.grpc.InferenceServerClient(url=...)`` takes it."""
        return f"{self.options.host}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://{self.options.host}:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.options.host}:{self.metrics_port}/metrics"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    # -- life cycle ----------------------------------------------------------------------------------
    def _explicit_ports(self) -> dict[str, int | None]:
        return {
            "--grpc-port": self.options.grpc_port,
            "--http-port": self.options.http_port,
            "--metrics-port": self.options.metrics_port,
        }

    def _check_start(self) -> None:
        if self.install is None:
            self.install = locate_tritonserver(self.options.tritonserver, self.options.image_python)
            # An image venv's numpy was checked when it was made; the builder's own is checked here.
            if self.install.bundled and self.options.image_python is None:
                check_numpy()
        if isinstance(self.repository, Path) and not self.repository.is_dir():
            raise UserError(f"{self.repository}: no such folder; pass the model repository's path")
        ports = self._explicit_ports()
        check_distinct_ports(ports)
        for flag, port in ports.items():
            if port is not None and port_in_use(port, self.options.host):
                raise UserError(
                    f"{flag} {port}: the port is already in use on {self.options.host}; "
                    "pick another or leave it out to use a free one"
                )

    def start(self) -> TritonServer:
        """Start and wait until the endpoints answer; raises ``ServerError`` (and leaves nothing running).

        Whatever stops the start (an error, Ctrl-C, SIGTERM raised as KeyboardInterrupt) stops the
        server's whole process group first: its Python stubs would outlive it otherwise.
        """
        self._check_start()
        if self.workdir is None:
            self._pycache_before = _pycache_dirs(self.repository)
            self.workdir = Path(tempfile.mkdtemp(prefix="repo-builder-triton-"))
        try:
            self._start_with_retries()
        except BaseException as exc:
            with signals_deferred():
                self._kill(force=not isinstance(exc, ServerError) or isinstance(exc, StartupHang))
                # A hang the caller can route around needs no log kept, nor an interrupt; an error does.
                kept = isinstance(exc, ServerError) and not isinstance(exc, StartupHang)
                self._keep_log = self._keep_log or kept
                self._cleanup()
            raise
        return self

    def _start_with_retries(self) -> None:
        if self._backends is None:
            assert self.install is not None and self.workdir is not None
            self._backends = prepare_backends(self.install, self.workdir)
        attempts = 1 if all(p is not None for p in self._explicit_ports().values()) else 3
        for attempt in range(attempts):
            self._spawn()
            try:
                self._wait_live()
                return
            except ServerError as exc:
                # A port picked free can be taken by someone else before the server binds it: pick again.
                if attempt + 1 < attempts and any(s in str(exc).lower() for s in _PORT_IN_USE):
                    self._kill(force=True)
                    continue
                raise

    def _pick_ports(self) -> Endpoints:
        opts = self.options
        grpc = opts.grpc_port or free_port(opts.host)
        http = opts.http_port or free_port(opts.host)
        metrics = opts.metrics_port or free_port(opts.host)
        while len({grpc, http, metrics}) < 3:
            metrics = free_port(opts.host)
            http = opts.http_port or (http if http != grpc else free_port(opts.host))
        return Endpoints(grpc, http, metrics)

    def _spawn(self) -> None:
        assert self.install is not None and self.workdir is not None
        ports = self._pick_ports()
        self.grpc_port, self.http_port, self.metrics_port = ports.grpc_port, ports.http_port, ports.metrics_port
        self._starts += 1
        if self.options.log_path is not None:
            self.log_path = Path(self.options.log_path)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        else:
            suffix = "" if self._starts == 1 else f"-{self._starts}"
            self.log_path = self.workdir / f"tritonserver{suffix}.log"
        self.log_start = self.log_size()  # a kept log is appended to: this start's part begins here
        self._shm_prefix = f"rb{os.getpid()}x{secrets.token_hex(3)}_"
        env = server_environment(self.install)
        env.update(dict(self.options.environment))
        self.process = spawn([str(self.install.binary), *self.arguments()], env, self.workdir, self.log_path)

    def arguments(self) -> list[str]:
        """tritonserver's command line (without the binary)."""
        return server_arguments(
            self.repository,
            self.options,
            Endpoints(self.grpc_port, self.http_port, self.metrics_port),
            backends=self._backends,
            caches=self.install.caches if self.install is not None else None,
            shm_prefix=self._shm_prefix,
        )

    def _wait_live(self) -> None:
        """Until /v2/health/live answers; models given to ``load_models`` load before it does."""
        deadline = time.monotonic() + self.options.startup_timeout
        stub_failed_at: float | None = None
        while not answers(f"{self.http_url}/v2/health/live"):
            if self.process is None or self.process.poll() is not None:
                raise self._died("during start-up")
            if self.on_wait is not None:
                self.on_wait()
            hung = failed_stubs(self.log_text(self.log_start)) if self._loads_at_start() else set()
            if hung and stub_failed_at is None:
                stub_failed_at = time.monotonic()
            if hung and time.monotonic() - (stub_failed_at or 0) > STUB_GRACE:
                raise StartupHang(
                    f"the Python-backend stub of {', '.join(sorted(hung))} failed and the start hangs",
                    frozenset(hung),
                    self.log_path,
                )
            if time.monotonic() > deadline:
                self._raise_unsettled()
                raise ServerError(
                    f"tritonserver did not answer within {self.options.startup_timeout:g} s "
                    f"(is the repository reachable? a remote one that is not hangs without output)"
                    f"{self._tail_clause()}; log: {self.log_path}",
                    self.log_path,
                )
            time.sleep(0.1)
        if self.on_wait is not None:
            self.on_wait()  # the lines logged just before the endpoints opened

    def _raise_unsettled(self) -> None:
        loading = frozenset(unsettled_models(self.log_text(self.log_start)))
        if loading and self.options.load_models:
            raise StartupTimeout(
                f"{', '.join(sorted(loading))} still loading after {self.options.startup_timeout:g} s",
                loading,
                self.log_path,
            )

    def _loads_at_start(self) -> bool:
        return bool(self.options.load_models) or self.options.mode != "explicit"

    def ready(self) -> bool:
        """What /v2/health/ready answers now."""
        return answers(f"{self.http_url}/v2/health/ready")

    def _died(self, when: str) -> ServerError:
        self._keep_log = True
        code = self.process.returncode if self.process is not None else None
        return ServerError(
            f"tritonserver {exit_description(code)} {when}{self._tail_clause()}; log: {self.log_path}",
            self.log_path,
        )

    def _tail_clause(self) -> str:
        tail = self.log_tail()
        return f": {tail}" if tail else ""

    def is_alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check_alive(self) -> None:
        """Raise ``ServerError`` (with the log's tail) if the server has died."""
        if self.process is None:
            raise ServerError("tritonserver is not running")
        if self.process.poll() is not None:
            raise self._died("while running")

    def restart(self, *, force: bool = True, options: ServerOptions | None = None) -> None:
        """Stop and start again on the same repository (with other ``options`` if given).

        ``force`` (the default) skips the graceful SIGTERM: a server hung on a load ignores it anyway.
        """
        self._kill(force=force)
        if options is not None:
            self.options = options
        self.start()

    def stop(self) -> None:
        """Stop the server and everything it started; remove the temporary folder unless a log is needed.

        SIGINT/SIGTERM wait until this is done (they are delivered right after).
        """
        with signals_deferred():
            self._kill()
            self._cleanup()

    def _kill(self, *, force: bool = False) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None
        if self.process is not None:
            stop_group(self.process, grace=self.options.exit_timeout + 2, force=force)
        remove_shared_memory(self._shm_prefix)

    def _cleanup(self) -> None:
        # The stub's Python runs isolated (PYTHONDONTWRITEBYTECODE is ignored) and leaves __pycache__
        # beside each model.py it imports: remove those it added, so the repository is left as it was.
        if self._pycache_before is not None:
            for folder in _pycache_dirs(self.repository) - self._pycache_before:
                shutil.rmtree(folder, ignore_errors=True)
        if self.workdir is None:
            return
        log_inside = self.log_path is not None and self.log_path.is_relative_to(self.workdir)
        if self._keep_log and log_inside:
            # Keep the log only; the copied backends folder (never a foreign install's own) goes.
            if self._backends is not None and self._backends.is_relative_to(self.workdir):
                shutil.rmtree(self._backends, ignore_errors=True)
            self._backends = None
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
            self._backends = None

    def discard_log(self) -> None:
        """The caller has read what it needs from the log (a death included): remove it on ``stop`` unless
        the options asked to keep it at a path (``--keep-log``)."""
        self._keep_log = self.options.log_path is not None

    def keep_log(self) -> None:
        """Keep the log file after ``stop`` (an error message points at it)."""
        self._keep_log = True

    def __enter__(self) -> TritonServer:
        if self.process is None:
            try:
                self.start()
            except BaseException:
                self.stop()
                raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- log -----------------------------------------------------------------------------------------
    def log_size(self) -> int:
        return log_size(self.log_path)

    def log_text(self, start: int = 0) -> str:
        """The log from byte ``start`` on (take ``log_size()`` before an action to read what it logged)."""
        return log_text(self.log_path, start)

    def log_tail(self, lines: int = 4) -> str:
        """The last meaningful log lines joined on one line (error lines preferred)."""
        return log_tail(self.log_text(self.log_start), lines)

    # -- client --------------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """A ``tritonclient.grpc.InferenceServerClient`` connected to this server."""
        if self._client is None:
            self.check_alive()
            self._client = connect(self.grpc_url)
        return self._client

    def try_load(self, name: str, timeout: float | None = 60.0) -> LoadOutcome:
        """Load ``name`` (explicit mode) and say how it went; never raises for a refusal.

        A load whose Python stub failed is cut short (see ``stub_hang``); its outcome is ``timed_out``.
        Call ``restart()`` after a timed-out load: the server is stuck on it.
        """
        offset = self.log_size()
        outcome = watch_load(self.client, name, timeout, lambda: self.log_text(offset), self.is_alive)
        if outcome is not None and not outcome.loaded and _transport_failed(outcome.reason):
            # The connection broke: the server is most likely dying; give it a moment to be reaped.
            with contextlib.suppress(subprocess.TimeoutExpired):
                if self.process is not None:  # always set while the server runs
                    self.process.wait(timeout=3)
        if outcome is None or (not outcome.loaded and not outcome.timed_out and not self.is_alive()):
            raise self._died(f"while loading '{name}'")
        return outcome

    def load(self, name: str, timeout: float | None = 60.0) -> None:
        """Load ``name``; raises ``ModelLoadError`` with the server's reason if it refuses."""
        outcome = self.try_load(name, timeout)
        if not outcome.loaded:
            raise ModelLoadError(name, outcome.reason or "no reason given")

    def unload(self, name: str, timeout: float | None = 30.0) -> None:
        unload_model(self.client, name, timeout)

    def models(self) -> tuple[ModelState, ...]:
        """The repository index: every model folder with its version, state and reason."""
        try:
            return repository_index(self.client)
        except Exception:
            self.check_alive()
            raise

    def infer(
        self,
        name: str,
        inputs: Mapping[str, np.ndarray],
        *,
        outputs: Sequence[str] | None = None,
        datatypes: Mapping[str, str] | None = None,
        timeout: float | None = 60.0,
    ) -> dict[str, np.ndarray]:
        """One request to ``name``; returns its outputs. Raises tritonclient's exception on a failure."""
        try:
            return infer_model(self.client, name, inputs, outputs=outputs, datatypes=datatypes, timeout=timeout)
        except Exception:
            self.check_alive()
            raise


def start_server(
    repository: Path | str,
    options: ServerOptions | None = None,
    **overrides: Any,
) -> contextlib.AbstractContextManager[TritonServer]:
    """``with start_server(repo, mode="explicit") as server:`` a started server, stopped on leaving.

    ``repository`` is a folder or a remote URL (``s3://bucket/prefix``, ``s3://host:port/bucket/prefix``;
    AWS_* variables and AWS_ENDPOINT_URL are passed to the server). ``overrides`` are ``ServerOptions``
    fields (``mode="poll"``, ``poll_seconds``, ``grpc_port``, ``tritonserver``, ...).
    """
    opts = replace(options or ServerOptions(), **overrides)
    return _running(TritonServer(repository, opts))


@contextlib.contextmanager
def _running(server: TritonServer) -> Iterator[TritonServer]:
    try:
        server.start()
        yield server
    finally:
        server.stop()
