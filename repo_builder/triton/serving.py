"""``serve``: a tritonserver on a repository, ready only when the repository is.

Every model is loaded while the server starts (explicit mode: ``--load-model`` for each model folder;
poll/none mode: Triton loads them all), and Triton opens its HTTP/gRPC endpoints only after those loads
settle: ``/v2/health/ready`` can never answer before the models. A model whose Python stub fails (Triton
2.51 then never finishes starting) or that is still loading after ``load_timeout`` is left out of a
fresh start. Once the start settles, a model that is not READY (left out, refused, or an ensemble over
one of those) refuses the whole start: the server is stopped and ``ModelsNotReady`` (exit 1) carries the
table. ``allow_unavailable`` serves the models that loaded and lists the rest instead. Only then is the
``ready_file`` written (and removed again on exit).

    with serve(Path("repo"), ServeSettings(ready_file=Path("ready"))) as serving:
        for row in serving.rows: ...
        serving.server.infer(...)
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from repo_builder.errors import RefusedError, UserError
from repo_builder.store.urls import is_remote
from repo_builder.triton.arguments import ServerOptions
from repo_builder.triton.errors import ServerError
from repo_builder.triton.locate import locate_tritonserver
from repo_builder.triton.server import StartupHang, StartupTimeout, TritonServer
from repo_builder.triton.server_log import explain_refusal, log_messages
from repo_builder.triton.standin import StandIn, remove_stage, stage_repository
from repo_builder.triton.stub_hang import failed_stubs
from repo_builder.triton_config import read_config_file
from repo_builder.triton_layout import CONFIG_FILE

Progress = Callable[[str], None]
_RESTARTS = 8  # each restart leaves out at least one model; bounded anyway


@dataclass(frozen=True)
class ServeSettings:
    """``serve``'s options (``ServerOptions`` fields, and what serve adds)."""

    server: ServerOptions = field(default_factory=ServerOptions)
    load_timeout: float = 60.0  # seconds the loads at start may take beyond startup_timeout
    keep_log: Path | None = None  # keep the server log here (default: removed on exit)
    ready_file: Path | None = None  # written once every model is loaded (allow_unavailable: the loadable ones)
    allow_unavailable: bool = False  # serve the models that loaded and list the rest, rather than refuse
    # The embedded Triton has no ONNX Runtime backend: in explicit mode its models are served by the stand-in
    # validate --live uses, from a linked copy (a copy does not follow changes, so poll mode never stages one).
    stand_in: bool = True

    def __post_init__(self) -> None:
        if not self.load_timeout > 0:
            raise UserError(f"--load-timeout {self.load_timeout:g}: give a positive number of seconds")


@dataclass(frozen=True)
class ModelRow:
    """One model version as the server sees it (or as serve reports one it had to leave out)."""

    name: str
    version: str
    state: str  # READY, UNAVAILABLE, ...
    reason: str


@dataclass
class Serving:
    server: TritonServer
    rows: tuple[ModelRow, ...]
    left_out: dict[str, str]  # model -> why it was not loaded (stub failed, still loading)


_NAMED = 4  # models named in the one-line refusal; the table lists them all
_STATUS_PREFIX = re.compile(r"^(?:[A-Z][a-z]+(?: [a-z]+)*: )+")  # Triton's "Internal: ", "Invalid argument: "


def _short_reason(reason: str, limit: int = 120) -> str:
    """A reason's first statement, without Triton's status prefix or the stub's traceback ("At: ...")."""
    text = _STATUS_PREFIX.sub("", reason.split(" At: ")[0].split("\\n")[0])
    text = text.split(". ")[0].strip() or "no reason given"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ModelsNotReady(RefusedError):
    """The start settled with models that are not READY; ``rows`` is the whole table, reasons included."""

    def __init__(self, rows: tuple[ModelRow, ...]) -> None:
        self.rows = rows
        bad = {r.name: r.reason for r in reversed(rows) if r.state != "READY"}  # one per model: its first row
        names = sorted(bad)
        named = ", ".join(f"{n} ({_short_reason(bad[n])})" for n in names[:_NAMED])
        more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
        total = len({r.name for r in rows})
        super().__init__(
            f"{len(names)} of {total} models not ready: {named}{more}; fix {'it' if len(names) == 1 else 'them'}, "
            "or pass --allow-unavailable to serve the models that loaded"
        )


def model_folders(repository: Path) -> tuple[str, ...]:
    """Every subfolder is a model to Triton (hidden ones too)."""
    return tuple(sorted(p.name for p in repository.iterdir() if p.is_dir()))


class _LogFollower:
    """Turns the server log's loading lines into one progress line per model."""

    def __init__(self, server: TritonServer, progress: Progress | None) -> None:
        self.server, self.progress, self.offset = server, progress, 0
        self.done: set[str] = set()

    def __call__(self) -> None:
        if self.progress is None:
            return
        self.offset = max(self.offset, self.server.log_start)
        text = self.server.log_text(self.offset)
        complete = text[: text.rfind("\n") + 1]
        self.offset += len(complete.encode("utf-8", errors="replace"))
        for message in log_messages(complete, "IEW"):
            self._line(message)

    def _line(self, message: str) -> None:
        assert self.progress is not None
        if message.startswith("loading: "):
            self.progress(f"loading {message.removeprefix('loading: ')} ...")
        elif message.startswith("successfully loaded '"):
            self.progress(f"loaded {message.split(chr(39))[1]}")
        elif message.startswith("failed to load '") and message.endswith("'"):  # not the per-version line
            self.progress(f"FAILED {message.split(chr(39))[1]}")


def _left_out_reason(exc: StartupHang, name: str, load_timeout: float) -> str:
    if isinstance(exc, StartupTimeout):
        return f"still loading after {load_timeout:g} s (--load-timeout); left out of the start"
    return "its Python-backend stub failed and the load hangs (is model.py missing?); left out of the start"


def _start(repository: Path | str, settings: ServeSettings, progress: Progress | None) -> tuple[TritonServer, dict[str, str]]:
    """Start, leaving out the models that would hang the start, until it comes up."""
    opts = settings.server
    explicit = opts.mode == "explicit"
    names = model_folders(repository) if explicit and isinstance(repository, Path) else ()
    opts = replace(
        opts,
        load_models=names or (("*",) if explicit else ()),
        startup_timeout=opts.startup_timeout + settings.load_timeout,
        log_path=settings.keep_log,
    )
    left_out: dict[str, str] = {}
    for _ in range(_RESTARTS):
        server = TritonServer(repository, opts)
        server.on_wait = _LogFollower(server, progress)
        try:
            server.start()
            return server, left_out
        except StartupHang as exc:
            if not names or not exc.models & set(opts.load_models):
                raise ServerError(f"{exc}; log: {exc.log_path}", exc.log_path) from None
            for name in sorted(exc.models & set(opts.load_models)):
                left_out[name] = _left_out_reason(exc, name, settings.load_timeout)
                if progress is not None:
                    progress(f"FAILED {name}: {left_out[name]}")
            opts = replace(opts, load_models=tuple(n for n in opts.load_models if n not in left_out))
    raise ServerError(f"tritonserver would not start on {repository}: too many models hang its start")


def model_rows(server: TritonServer, left_out: dict[str, str]) -> tuple[ModelRow, ...]:
    """One row per model version the server knows; where it gives no reason, ours or its log's."""
    rows = []
    log = server.log_text(server.log_start)
    hung = failed_stubs(log)
    for state in server.models():
        reason = state.reason
        if not reason and state.state != "READY":
            reason = left_out.get(state.name) or explain_refusal(None, log, state.name)
            if state.name in hung and state.name not in left_out:
                reason = f"its Python-backend stub failed: {reason}"
        rows.append(ModelRow(state.name, state.version or "-", state.state or "UNAVAILABLE", " ".join(reason.split())))
    return tuple(rows)


def write_ready_file(path: Path, server: TritonServer) -> None:
    """The endpoints, one per line, written atomically (a probe never reads half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f"grpc {server.grpc_url}\nhttp {server.http_url}\nmetrics {server.metrics_url}\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UserError(f"--ready-file {path}: cannot write ({exc.strerror or exc})") from None


def _remove_stale(path: Path) -> None:
    """A ready file left by an earlier run would tell a probe this start is ready before it is."""
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        raise UserError(f"--ready-file {path}: cannot remove the old one ({exc.strerror or exc})") from None


@contextlib.contextmanager
def serve(repository: Path | str, settings: ServeSettings | None = None, progress: Progress | None = None) -> Iterator[Serving]:
    """A started server with every model loaded; stopped (and the ready file removed) on exit.

    ``repository`` is a folder or a remote URL (``s3://...``: the server reads it, see ``store.for_triton``).
    ``progress`` gets one plain line per model as it loads. A model that is not READY once the start
    settles raises ``ModelsNotReady`` (a ``RefusedError``, with ``rows``) after stopping the server,
    unless ``settings.allow_unavailable``: then ``rows`` lists it and the rest is served.
    """
    settings = settings or ServeSettings()
    if not is_remote(str(repository)):
        repository = Path(repository)
        if not repository.is_dir():
            raise UserError(f"{repository}: no such folder; pass the model repository's path")
    if settings.ready_file is not None:
        _remove_stale(settings.ready_file)
    with _stand_ins(repository, settings, progress) as served:
        yield from _serve_started(served, settings, progress)


def onnxruntime_models(repository: Path) -> tuple[str, ...]:
    """Model folders whose config names Triton's ONNX Runtime backend (platform or backend), read through the
    bounded, guarded config reader; a config that does not parse is left for the server to refuse."""
    found = []
    for name in model_folders(repository):
        config = read_config_file(repository / name / CONFIG_FILE, repository).config
        if config is not None and (config.platform == "onnxruntime_onnx" or config.backend == "onnxruntime"):
            found.append(name)
    return tuple(found)


@contextlib.contextmanager
def _stand_ins(repository: Path | str, settings: ServeSettings, progress: Progress | None) -> Iterator[Path | str]:
    """The folder to serve: the repository, or a linked copy whose ONNX Runtime models run on the stand-in."""
    if not isinstance(repository, Path) or not settings.stand_in or settings.server.mode != "explicit":
        yield repository
        return
    names = onnxruntime_models(repository)
    if not names or not locate_tritonserver(settings.server.tritonserver).bundled:
        yield repository
        return
    if progress is not None:
        progress(f"the embedded Triton has no ONNX Runtime backend: {', '.join(names)} served by the ONNX Runtime stand-in")
    staged = stage_repository(repository, [StandIn(name) for name in names])
    try:
        yield staged.path
    finally:
        remove_stage(staged)


def _serve_started(repository: Path | str, settings: ServeSettings, progress: Progress | None) -> Iterator[Serving]:
    server, left_out = _start(repository, settings, progress)
    try:
        serving = Serving(server, model_rows(server, left_out), left_out)
        if not settings.allow_unavailable and any(row.state != "READY" for row in serving.rows):
            raise ModelsNotReady(serving.rows)  # the finally stops the server; no ready file was written
        if settings.ready_file is not None:
            write_ready_file(settings.ready_file, server)
        yield serving
    finally:
        try:
            server.stop()
        finally:
            if settings.ready_file is not None:
                settings.ready_file.unlink(missing_ok=True)
