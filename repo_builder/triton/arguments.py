"""How to run tritonserver: ``ServerOptions`` (data) and the command line built from them (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repo_builder.errors import UserError

if TYPE_CHECKING:
    from repo_builder.triton.image_python import ImagePython

MODES = ("explicit", "poll", "none")


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
    log_path: Path | None = None  # default: a file in the server's temporary folder (kept when given)
    extra_args: tuple[str, ...] = ()
    # --strict-readiness: ready only when every loaded model is. None: Triton's default (true) in
    # explicit mode, false in poll/none mode (serve lists the models that failed instead).
    strict_readiness: bool | None = None
    # Extra environment for the server (an s3:// repository's endpoint and credentials).
    environment: tuple[tuple[str, str], ...] = ()
    # The wheel's server runs Python steps on this Python, as the target image does (``image_python.py``);
    # a foreign server (a container's) ignores it. None: on the builder's own environment.
    image_python: ImagePython | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UserError(f"--model-control-mode {self.mode}: use one of {', '.join(MODES)}")
        for label, value in (("startup", self.startup_timeout), ("exit", self.exit_timeout)):
            if not value > 0:
                raise UserError(f"the {label} timeout must be a positive number of seconds, not {value}")


@dataclass(frozen=True)
class Endpoints:
    grpc_port: int
    http_port: int
    metrics_port: int


def server_arguments(
    repository: Path | str,
    options: ServerOptions,
    endpoints: Endpoints,
    *,
    backends: Path | None = None,
    caches: Path | None = None,
    shm_prefix: str = "",
) -> list[str]:
    """tritonserver's command line (without the binary)."""
    opts = options
    args = [
        f"--model-repository={repository}",
        f"--model-control-mode={opts.mode}",
        f"--grpc-address={opts.host}",
        f"--grpc-port={endpoints.grpc_port}",
        f"--http-address={opts.host}",
        f"--http-port={endpoints.http_port}",
        f"--metrics-address={opts.host}",
        f"--metrics-port={endpoints.metrics_port}",
        f"--exit-timeout-secs={max(1, int(opts.exit_timeout))}",
        f"--log-verbose={opts.log_verbose}",
    ]
    if shm_prefix:
        args.append(f"--backend-config=python,shm-region-prefix-name={shm_prefix}")
    if backends is not None:
        args.append(f"--backend-directory={backends}")
    if caches is not None:
        args.append(f"--cache-directory={caches}")
    args.extend(_mode_arguments(opts))
    if opts.http_header_forward_pattern:
        args.append(f"--http-header-forward-pattern={opts.http_header_forward_pattern}")
    args.extend(opts.extra_args)
    return args


def _mode_arguments(opts: ServerOptions) -> list[str]:
    args = []
    if opts.strict:
        args.append("--disable-auto-complete-config")
    if opts.mode == "poll":
        args.append(f"--repository-poll-secs={opts.poll_seconds}")
    if opts.mode == "explicit":
        args.extend(f"--load-model={m}" for m in opts.load_models)
    if opts.mode != "explicit" or opts.load_models:
        # Keep serving although some model failed: the caller reports them.
        args.append("--exit-on-error=false")
    strict_readiness = opts.strict_readiness
    if strict_readiness is None and opts.mode != "explicit":
        strict_readiness = False
    if strict_readiness is not None:
        args.append(f"--strict-readiness={'true' if strict_readiness else 'false'}")
    return args
