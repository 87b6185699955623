"""Run a real tritonserver on loopback for as long as a ``with`` block lasts, and always stop it.

    from repo_builder.triton import start_server

    with start_server(Path("repo")) as server:         # explicit mode, free ports, log captured
        server.load("ensemble")                          # raises ModelLoadError with the server's reason
        outputs = server.infer("ensemble", {"TEXT": np.array([[b"hi"]], dtype=object)})
        print(server.grpc_url, server.log_path)

The server runs in its own process group (so a Ctrl-C in the terminal reaches us, and we stop it in
order) and is stopped with SIGTERM, then SIGKILL for the whole group after ``exit_timeout``: a server
whose load hangs ignores SIGTERM. Its log goes to a file; errors quote the log's last lines and its path,
and a log that explains a failure is kept.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError
from repo_builder.triton.client import (
    LoadOutcome,
    ModelState,
    connect,
    infer_model,
    load_model,
    repository_index,
    unload_model,
)
from repo_builder.triton.locate import (
    TritonInstall,
    check_numpy,
    locate_tritonserver,
    prepare_backends,
    server_environment,
)

if TYPE_CHECKING:
    import numpy as np

MODES = ("explicit", "poll", "none")
LOG_TAIL_LINES = 4
_PORT_IN_USE = ("already in use", "address already in use")
# What the server logs on every CPU-only machine; never the reason something failed.
_HARMLESS = ("nvml", "dcgm", "cuda", "gpu metrics", "pinned memory")


# Health checks go straight to the server: an http_proxy in the environment must not catch them.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# Seconds to wait for a load's answer after its Python-backend stub logged that it could not start.
STUB_GRACE = 3.0


def _stub_failed(log_text: str, name: str) -> bool:
    """The log says the stub of model ``name`` could not start (the load will then hang in 2.51)."""
    for line in log_text.splitlines():
        if "Failed to preinitialize Python stub" in line and f"/{name}/" in line:
            return True
    return False


def _transport_failed(reason: str | None) -> bool:
    text = (reason or "").lower()
    return any(s in text for s in ("failed to connect", "connection reset", "socket closed", "unavailable:"))


class ServerError(UserError):
    """tritonserver failed to start, or died; the message names the log file."""

    def __init__(self, message: str, log_path: Path | None = None) -> None:
        super().__init__(message)
        self.log_path = log_path


class ModelLoadError(UserError):
    """The server refused to load a model; ``reason`` is its own message."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"tritonserver refused model '{name}': {reason}")
        self.name = name
        self.reason = reason


@dataclass(frozen=True)
class ServerOptions:
    """How to run the server. Ports left ``None`` are picked free on ``host``."""

    mode: str = "explicit"  # explicit | poll | none (Triton's --model-control-mode)
    tritonserver: str | None = None  # a binary to use instead of the one found (see locate.py)
    host: str = "127.0.0.1"
    grpc_port: int | None = None
    http_port: int | None = None
    metrics_port: int | None = None
    startup_timeout: float = 60.0  # seconds until the endpoints answer (a hung S3 repository never does)
    load_models: tuple[str, ...] = ()  # explicit mode: --load-model at start ("*" loads all)
    strict: bool = False  # --disable-auto-complete-config
    poll_seconds: int = 5  # poll mode: --repository-poll-secs
    http_header_forward_pattern: str | None = None
    exit_timeout: float = 5.0  # grace after SIGTERM before SIGKILL
    log_verbose: int = 0
    log_path: Path | None = None  # default: a file in the server's temporary folder
    extra_args: tuple[str, ...] = ()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something listens on ``port`` (connections lingering in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _pycache_dirs(repository: Path | str) -> set[Path]:
    if not isinstance(repository, Path) or not repository.is_dir():
        return set()
    return set(repository.rglob("__pycache__"))


def _die_with_parent() -> None:
    """In the child: get SIGKILL if the process that started us dies (Linux), so nothing is left behind."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class TritonServer:
    """A tritonserver process and a gRPC client to it. Use ``start_server`` (or ``with`` on this)."""

    def __init__(self, repository: Path | str, options: ServerOptions | None = None) -> None:
        # Remote repositories (s3://, gs://, as://) go to the server as they are.
        text = str(repository)
        self.repository: Path | str = text if "://" in text else Path(repository).resolve()
        self.options = options or ServerOptions()
        if self.options.mode not in MODES:
            raise UserError(f"--model-control-mode {self.options.mode}: use one of {', '.join(MODES)}")
        self.process: subprocess.Popen[bytes] | None = None
        self.install: TritonInstall | None = None
        self.workdir: Path | None = None
        self.log_path: Path | None = None
        self.grpc_port = self.http_port = self.metrics_port = 0
        self._backends: Path | None = None
        self._client: Any = None
        self._keep_log = self.options.log_path is not None
        self._starts = 0
        self._shm_prefix = ""
        self._pycache_before: set[Path] | None = None  # taken before the first start

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
    def start(self) -> TritonServer:
        """Start and wait until the endpoints answer; raises ``ServerError`` (and leaves nothing running)."""
        if self.install is None:
            self.install = locate_tritonserver(self.options.tritonserver)
            if self.install.bundled:
                check_numpy()
        if isinstance(self.repository, Path) and not self.repository.is_dir():
            raise UserError(f"{self.repository}: no such folder; pass the model repository's path")
        explicit_ports = {
            "--grpc-port": self.options.grpc_port,
            "--http-port": self.options.http_port,
            "--metrics-port": self.options.metrics_port,
        }
        for flag, port in explicit_ports.items():
            if port is not None and port_in_use(port, self.options.host):
                raise UserError(
                    f"{flag} {port}: the port is already in use on {self.options.host}; "
                    "pick another or leave it out to use a free one"
                )
        if self.workdir is None:
            self._pycache_before = _pycache_dirs(self.repository)
            self.workdir = Path(tempfile.mkdtemp(prefix="repo-builder-triton-"))
            self._backends = prepare_backends(self.install, self.workdir)
        attempts = 1 if all(p is not None for p in explicit_ports.values()) else 3
        for attempt in range(attempts):
            self._spawn()
            try:
                self._wait_ready()
                return self
            except ServerError as exc:
                self._kill()
                # A port picked free can be taken by someone else before the server binds it: pick again.
                if attempt + 1 < attempts and any(s in str(exc).lower() for s in _PORT_IN_USE):
                    continue
                self._keep_log = True
                self._cleanup()
                raise
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        assert self.install is not None and self.workdir is not None
        opts = self.options
        self.grpc_port = opts.grpc_port or free_port(opts.host)
        self.http_port = opts.http_port or free_port(opts.host)
        self.metrics_port = opts.metrics_port or free_port(opts.host)
        while len({self.grpc_port, self.http_port, self.metrics_port}) < 3:
            self.metrics_port = free_port(opts.host)
        self._starts += 1
        if opts.log_path is not None:
            self.log_path = Path(opts.log_path)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        else:
            suffix = "" if self._starts == 1 else f"-{self._starts}"
            self.log_path = self.workdir / f"tritonserver{suffix}.log"
        self._shm_prefix = f"rb{os.getpid()}x{secrets.token_hex(3)}_"
        args = [str(self.install.binary), *self.arguments()]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=server_environment(self.install),
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def arguments(self) -> list[str]:
        """tritonserver's command line (without the binary)."""
        opts = self.options
        args = [
            f"--model-repository={self.repository}",
            f"--model-control-mode={opts.mode}",
            f"--grpc-address={opts.host}",
            f"--grpc-port={self.grpc_port}",
            f"--http-address={opts.host}",
            f"--http-port={self.http_port}",
            f"--metrics-address={opts.host}",
            f"--metrics-port={self.metrics_port}",
            f"--exit-timeout-secs={max(1, int(opts.exit_timeout))}",
            f"--log-verbose={opts.log_verbose}",
            f"--backend-config=python,shm-region-prefix-name={self._shm_prefix}",
        ]
        if self._backends is not None:
            args.append(f"--backend-directory={self._backends}")
        if self.install is not None and self.install.caches is not None:
            args.append(f"--cache-directory={self.install.caches}")
        if opts.strict:
            args.append("--disable-auto-complete-config")
        if opts.mode == "poll":
            args.append(f"--repository-poll-secs={opts.poll_seconds}")
        if opts.mode == "explicit":
            args.extend(f"--load-model={m}" for m in opts.load_models)
        if opts.mode != "explicit":
            # Keep serving (and be ready) although some model failed: serve reports them in its table.
            args.extend(["--exit-on-error=false", "--strict-readiness=false"])
        if opts.http_header_forward_pattern:
            args.append(f"--http-header-forward-pattern={opts.http_header_forward_pattern}")
        args.extend(opts.extra_args)
        return args

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.options.startup_timeout
        url = f"{self.http_url}/v2/health/live"
        while True:
            if self.process is None or self.process.poll() is not None:
                raise self._died("during start-up")
            try:
                with _DIRECT.open(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self._keep_log = True
                raise ServerError(
                    f"tritonserver did not answer within {self.options.startup_timeout:g} s "
                    f"(is the repository reachable? a remote one that is not hangs without output)"
                    f"{self._tail_clause()}; log: {self.log_path}",
                    self.log_path,
                )
            time.sleep(0.1)

    def _died(self, when: str) -> ServerError:
        self._keep_log = True
        code = self.process.returncode if self.process is not None else None
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        return ServerError(
            f"tritonserver {how} {when}{self._tail_clause()}; log: {self.log_path}", self.log_path
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

    def restart(self, *, force: bool = True) -> None:
        """Stop and start again on the same repository; the client reconnects.

        ``force`` (the default) skips the graceful SIGTERM: a server hung on a load ignores it anyway.
        """
        self._kill(force=force)
        self.start()

    def stop(self) -> None:
        """Stop the server and everything it started; remove the temporary folder unless a log is needed."""
        self._kill()
        self._cleanup()

    def _kill(self, *, force: bool = False) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None
        proc = self.process
        if proc is None:
            return
        pgid = proc.pid  # the server leads its own session, so its group id is its pid
        if proc.poll() is None and not force:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=self.options.exit_timeout + 2)
        # SIGKILL whatever is left in the group (a hung server, Python-backend stubs), and reap it.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                break
            except PermissionError:
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)
            time.sleep(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        self._remove_shared_memory()

    def _remove_shared_memory(self) -> None:
        # A killed Python backend leaves its shared-memory regions behind; ours carry a unique prefix.
        shm = Path("/dev/shm")
        if not self._shm_prefix or not shm.is_dir():
            return
        for region in shm.glob(f"{self._shm_prefix}*"):
            with contextlib.suppress(OSError):
                region.unlink()

    def _cleanup(self) -> None:
        # The stub's Python runs isolated (PYTHONDONTWRITEBYTECODE is ignored) and leaves __pycache__
        # beside each model.py it imports: remove those it added, so the repository is left as it was.
        if self._pycache_before is not None:
            for folder in _pycache_dirs(self.repository) - self._pycache_before:
                shutil.rmtree(folder, ignore_errors=True)
        if self.workdir is None:
            return
        if self._keep_log:
            if self._backends is not None:
                shutil.rmtree(self._backends, ignore_errors=True)
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
            self._backends = None

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
        try:
            return self.log_path.stat().st_size if self.log_path is not None else 0
        except OSError:
            return 0

    def log_text(self, start: int = 0) -> str:
        """The log from byte ``start`` on (take ``log_size()`` before an action to read what it logged)."""
        if self.log_path is None:
            return ""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last meaningful log lines joined on one line (error lines preferred)."""
        text = self.log_text()
        # Skip the option/model tables the server prints (rows start with '|' or '+').
        rows = [" ".join(r.split()) for r in text.splitlines() if r.strip() and r.strip()[0] not in "+|"]
        rows = [r for r in rows if not any(h in r.lower() for h in _HARMLESS)]
        errors = [r for r in rows if r[:1] == "E" or "error" in r.lower()]
        picked = (errors or rows)[-lines:]
        return " | ".join(picked)

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

        A load that will never finish is cut short: Triton 2.51 waits forever for a Python-backend stub
        that failed to start (a missing model.py), so when the log shows that failure for this model
        and no answer follows within ``STUB_GRACE`` seconds, the outcome is ``timed_out`` at once.
        Call ``restart()`` after a timed-out load: the server is stuck on it.
        """
        client = self.client
        offset = self.log_size()
        done: list[LoadOutcome] = []
        worker = threading.Thread(target=lambda: done.append(load_model(client, name, timeout)), daemon=True)
        worker.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        stub_failed_at: float | None = None
        while worker.is_alive():
            worker.join(0.2)
            if done or not worker.is_alive():
                break
            now = time.monotonic()
            if stub_failed_at is None and _stub_failed(self.log_text(offset), name):
                stub_failed_at = now
            if stub_failed_at is not None and now - stub_failed_at > STUB_GRACE:
                return LoadOutcome(
                    name, False, f"the Python-backend stub of '{name}' failed and the load hangs", True
                )
            if deadline is not None and now > deadline + 5:  # the client's own timeout should have fired
                return LoadOutcome(
                    name, False, f"no answer within {timeout:g} s while loading '{name}'", True
                )
            if not self.is_alive():
                break
        outcome = done[0] if done else None
        if outcome is not None and not outcome.loaded and _transport_failed(outcome.reason):
            # The connection broke: the server is most likely dying; give it a moment to be reaped.
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=3)  # type: ignore[union-attr]
        if outcome is None or (not outcome.loaded and not self.is_alive()):
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
            return infer_model(
                self.client, name, inputs, outputs=outputs, datatypes=datatypes, timeout=timeout
            )
        except Exception:
            self.check_alive()
            raise


def start_server(
    repository: Path | str,
    options: ServerOptions | None = None,
    **overrides: Any,
) -> contextlib.AbstractContextManager[TritonServer]:
    """``with start_server(repo, mode="explicit") as server:`` a started server, stopped on leaving.

    ``overrides`` are ``ServerOptions`` fields (``mode``, ``grpc_port``, ``tritonserver``, ...).
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
