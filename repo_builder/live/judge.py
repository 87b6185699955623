"""``validate --live``: load every model into a real tritonserver and hold the offline verdict against it.

The server runs on a staged, linked copy of the repository (``triton/standin.py``), never on the
repository itself: the Python stub's ``__pycache__`` lands in the copy, and ONNX Runtime models, which
the embedded Triton cannot load, are served there by a stand-in that performs the ONNX Runtime backend's
own load-time checks. Models it cannot load at all (TensorRT, other backends, an ensemble using them) are
"not proven live" (RB904): an error unless ``allow_unproven``. Members load first, then ensembles (in
dependency order), one explicit-mode load each with a timeout; each ensemble that loads gets one request
(``request.py``: ``--input`` files, else its family's real sample, else synthesized from its config);
with real inputs, no answer (RB903, pointing at the failing step's file and line) or a wrong one (RB908)
is an error, with synthesized inputs a failure is a warning. Each model ends in one of: loaded, refused for a configuration or layout
reason (RB901, with RB902 when offline said ok), failed in its own code (RB905: an exception, its process
dying, or the server dying while running it), timed out (RB906), not proven (RB904). A server that died
or hung is restarted for the models still to come; if none will start, they are not proven. Codes:
``validate/live_codes.py``. SIGTERM cleans up as Ctrl-C does. Steps built with ``--nvcf-assets`` are proven through a
real request through assets (``assets.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path

from repo_builder.deploy_target import TOO_LARGE_TO_SHIP, DeployTarget
from repo_builder.errors import UserError
from repo_builder.live.assets import (
    FORWARD_PATTERN,
    asset_ensemble,
    has_asset_steps,
    prove_assets,
    redirect_asset_roots,
)
from repo_builder.live.infer import InferOutcome, infer_once
from repo_builder.live.outcome import (
    Failure,
    classify_crash,
    classify_failure,
    failing_step,
    repository_frames,
)
from repo_builder.live.plan import ModelRoute, Route, plan_routes, step_models
from repo_builder.live.request import InputFile, LiveRequest, plan_request
from repo_builder.live.samples import recorded_tasks
from repo_builder.signals import interrupt_on_termination
from repo_builder.store.for_triton import remote_repository
from repo_builder.store.urls import is_remote
from repo_builder.triton.errors import ServerError
from repo_builder.triton.image_python import ImagePython, prepare_image_python, standin_packages
from repo_builder.triton.locate import locate_tritonserver
from repo_builder.triton.process import exit_description
from repo_builder.triton.server import TritonServer, start_server
from repo_builder.triton.server_log import explain_refusal, log_messages
from repo_builder.triton.standin import StandIn, remove_stage, stage_repository
from repo_builder.validate.live_codes import (
    DEFAULT_LOAD_TIMEOUT,
    DISAGREEMENT,
    INFERENCE_FAILED,
    LIVE_CODES,
    MODEL_CODE_FAILED,
    NOT_PROVEN,
    REFUSED,
    STAND_IN,
    TIMED_OUT,
    WRONG_ANSWER,
    LiveCode,
)
from repo_builder.validate.records import Diagnostic, ModelEntry, Repository, Severity
from repo_builder.validate.report import LiveResult, ModelSummary, Report
from repo_builder.validate.report import LiveStatus as Status

__all__ = [
    "LIVE_CODES",
    "LiveSettings",
    "LiveVerdict",
    "Status",
    "explain_refusal",
    "judge_repository",
    "load_order",
    "log_messages",
    "merge_verdicts",
    "validate_live",
]

Progress = Callable[[str], None]
# Refusals that say something about this machine or server build, not about the repository.
_ENVIRONMENT_LIMITS = ("unable to find backend library", "no gpus are available", "no gpu")


@dataclass(frozen=True)
class LiveSettings:
    tritonserver: str | None = None  # --tritonserver PATH; default: see repo_builder.triton.locate
    load_timeout: float = DEFAULT_LOAD_TIMEOUT  # seconds per model load
    infer: bool = True  # send one synthesized request to each ensemble that loads
    strict: bool = False  # --strict: the server runs with --disable-auto-complete-config
    startup_timeout: float = 60.0
    allow_unproven: bool = False  # models --live cannot load here are warnings, not errors
    stand_in: bool = True  # serve ONNX Runtime models through the stand-in on the embedded Triton
    s3_endpoint: str | None = None  # for s3:// repositories (default: $AWS_ENDPOINT_URL)
    # The image judged against: the embedded server runs every Python step on that image's Python, in an
    # environment holding only the image's packages (plus what the repository ships). None: the builder's.
    deploy: DeployTarget | None = None
    image_packages: tuple[tuple[str, str], ...] = ()  # --step-packages dockerfile: what the built image adds
    # False: Python steps run in the builder's own environment even when an image is judged (a measurement's
    # baseline; never a proof for the image).
    on_image_python: bool = True
    inputs: tuple[InputFile, ...] = ()  # --input [MODEL:]NAME=FILE: real inputs for the ensembles' requests


@dataclass(frozen=True)
class LiveVerdict:
    """The server's word on one model, with what the report needs beyond ``LiveResult``."""

    result: LiveResult
    infer_error: str | None = None  # why the request failed
    waited: float | None = None  # seconds waited for a load that timed out
    request: str | None = None  # what was sent: "a synthesized request", "a real request (a JPEG photo, ...)"
    real_request: bool = False  # the request carried real inputs: its failure is an error
    wrong_answer: str | None = None  # how the answer differs from the config or fails the family's check

    @property
    def loaded(self) -> bool:
        return self.result.loaded

    @property
    def status(self) -> str | None:
        return self.result.status


def _outcome(status: str, reason: str | None = None, inferred: bool | None = None, by: str | None = None) -> LiveResult:
    return LiveResult(status == Status.LOADED, reason, inferred, status=status, proven_by=by)


def validate_live(report: Report, settings: LiveSettings, progress: Progress | None = None) -> Report:
    """Load the report's repository into a real server; return the report with live verdicts added.

    A local repository is served from a staged copy (it is never written to); an ``s3://`` one is read
    by the server directly (``Repository.location``). SIGTERM is handled as Ctrl-C: the server, its
    stubs and the stage are removed before ``KeyboardInterrupt`` propagates. ``progress`` gets plain
    lines: one as each model's load starts (``live: loading NAME ...``), one as its verdict comes in
    (``live: NAME: STATUS``).
    """
    repository = report.repository
    location = repository.location if is_remote(repository.location) else None
    with interrupt_on_termination():
        if location is not None:
            remote = remote_repository(location, settings.s3_endpoint)
            image, why = _image_python(settings)
            with _server(remote.url, settings, remote.environment, image_python=image) as server:
                routes = plan_routes(repository, embedded=_embedded(server), remote=True,
                                     no_image_python=why if _embedded(server) else None)
                verdicts = judge_repository(server, repository, settings, routes, progress)
            return merge_verdicts(report, verdicts, allow_unproven=settings.allow_unproven)
        verdicts = _judge_local(repository, settings, progress)
    return merge_verdicts(report, verdicts, allow_unproven=settings.allow_unproven)


def _judge_local(repository: Repository, settings: LiveSettings, progress: Progress | None) -> dict[str, LiveVerdict]:
    # Stand-ins only for the embedded Triton: a full Triton (--tritonserver, or one on PATH) loads the
    # ONNX Runtime models itself, from an unchanged copy.
    embedded = locate_tritonserver(settings.tritonserver).bundled
    image, why = _image_python(settings) if embedded else (None, None)
    routes = plan_routes(repository, embedded=embedded and settings.stand_in, no_image_python=why)
    stand_ins = [StandIn(r.name) for r in routes.values() if r.route == Route.STAND_IN]
    packages = None
    if image is not None and stand_ins:  # the stand-in's onnxruntime, for the image's Python, beside (not in) its venv
        found = standin_packages(image.version)
        if isinstance(found, str):
            routes = plan_routes(repository, embedded=True, no_stand_in=found)
            stand_ins = []
        else:
            packages = found
    staged = stage_repository(repository.root, stand_ins, packages=packages)
    try:
        asset_root = _redirect_assets(staged.path, repository)  # NVCF asset steps: a root in the stage
        forward = FORWARD_PATTERN if asset_root is not None else None
        with _server(staged.path, settings, forward_pattern=forward, image_python=image) as server:
            routes = _unstaged(routes, staged.stand_ins)
            return judge_repository(server, repository, settings, routes, progress, asset_root=asset_root)
    finally:
        remove_stage(staged)


def _image_python(settings: LiveSettings) -> tuple[ImagePython | None, str | None]:
    """The target image's Python prepared here, or why it cannot be (then its steps are not proven)."""
    if settings.deploy is None or not settings.on_image_python:
        return None, None
    row = settings.deploy.image
    large = sorted(name for name, _ in settings.image_packages if name.lower() in TOO_LARGE_TO_SHIP)
    if large:  # the Dockerfile's image has them; installing them here for the proof is out of proportion
        return None, (f"not proven on the image built from the repository's Dockerfile: it installs {', '.join(large)}, "
                      "which this machine does not install for a proof")
    if settings.image_packages:
        row = replace(row, packages=(*row.packages, *settings.image_packages))
    found = prepare_image_python(row)
    if isinstance(found, str):
        return None, f"not proven on {settings.deploy.image_name}'s Python {row.python}: {found}"
    return found, None


def _redirect_assets(staged: Path, repository: Repository) -> Path | None:
    if not has_asset_steps(repository):
        return None
    root = staged.parent / "nvcf-assets"
    root.mkdir()
    redirect_asset_roots(staged, repository, root)
    return root


def _unstaged(routes: dict[str, ModelRoute], staged: tuple[str, ...]) -> dict[str, ModelRoute]:
    """A stand-in the stage could not install (its config does not parse): load as it is, let it refuse."""
    return {
        n: (replace(r, route=Route.LOAD) if r.route == Route.STAND_IN and n not in staged else r)
        for n, r in routes.items()
    }


def _server(
    repository: Path | str, settings: LiveSettings, environment: tuple[tuple[str, str], ...] = (), forward_pattern: str | None = None,
    image_python: ImagePython | None = None,
) -> AbstractContextManager[TritonServer]:
    return start_server(
        repository,
        image_python=image_python,
        mode="explicit",
        environment=environment,
        http_header_forward_pattern=forward_pattern,
        tritonserver=settings.tritonserver,
        strict=settings.strict,
        startup_timeout=settings.startup_timeout,
    )


def _embedded(server: TritonServer) -> bool:
    return server.install is not None and server.install.bundled


def load_order(repository: Repository) -> list[ModelEntry]:
    """Non-ensembles by name, then ensembles after every ensemble they use."""
    members = sorted((m for m in repository.models if not m.is_ensemble), key=lambda m: m.name)
    ensembles = {m.name: m for m in repository.models if m.is_ensemble}
    ordered: list[ModelEntry] = []
    placed: set[str] = set()
    pending = sorted(ensembles)
    while pending:
        ready = [n for n in pending if not (step_models(ensembles[n]) & (set(ensembles) - placed - {n}))]
        if not ready:  # a cycle: the server refuses it anyway; keep going in name order
            ready = pending[:1]
        for n in ready:
            ordered.append(ensembles[n])
            placed.add(n)
        pending = [n for n in pending if n not in placed]
    return members + ordered


def _needs(model: ModelEntry, repository: Repository, names: set[str]) -> str | None:
    """The first model of ``names`` that ``model`` uses, directly or through other ensembles."""
    seen: set[str] = set()
    stack = sorted(step_models(model))
    while stack:
        name = stack.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if name in names:
            return name
        inner = repository.model(name)
        if inner is not None and inner.is_ensemble:
            stack.extend(sorted(step_models(inner)))
    return None


def _hang_reason(said: str | None, log_text: str) -> str:
    logged = [e for e in log_messages(log_text, "IEW") if "preinitialize" in e.lower() or "not found" in e.lower()]
    why = f"; the server logged: {logged[-1].strip()}" if logged else ""
    return f"{said or 'the load did not finish'} (the server was restarted){why}"


def _environment_limited(reason: str | None) -> bool:
    lower = (reason or "").lower()
    return any(s in lower for s in _ENVIRONMENT_LIMITS)


def _status(kind: Failure) -> str:
    return Status.MODEL_CODE_FAILED if kind == Failure.MODEL_CODE else Status.REFUSED


class _Judge:
    """Loads models one by one into ``server``; remembers which ones hung or crashed it."""

    def __init__(
        self, server: TritonServer, repository: Repository, settings: LiveSettings, asset_root: Path | None = None, progress: Progress | None = None
    ) -> None:
        self.server, self.repository, self.settings = server, repository, settings
        self.asset_root, self.progress = asset_root, progress or _silent  # NVCF assets: the stage's root
        # The task each ensemble's build recorded: its family's real sample request (for s3://, the root is
        # the mirror of the small files, the manifest included).
        self.tasks = recorded_tasks(repository.root)
        self.stuck: dict[str, str] = {}  # model -> "hung" / "timed out" / "crashed the server"
        self.down: str | None = None  # why no server is left to load the remaining models
        self.log_named = False  # a reason points at the server's log: it must outlive the run

    def _restart(self, after: str, what: str) -> None:
        """A fresh server for the models still to come; if none will start, they are not proven."""
        try:
            self.server.restart()
        except (ServerError, UserError) as exc:  # UserError: the staged copy is gone
            self.down = f"tritonserver could not be restarted after '{after}' {what}: {exc}"
            self.log_named = isinstance(exc, ServerError)

    def blocked(self, model: ModelEntry) -> LiveVerdict | None:
        if self.down is not None:
            return LiveVerdict(_outcome(Status.NOT_PROVEN, self.down))
        if not model.is_ensemble or (member := _needs(model, self.repository, set(self.stuck))) is None:
            return None
        reason = (
            f"ensemble '{model.name}' depends on '{member}' which has no loaded version: its load "
            f"{self.stuck[member]} (not tried again)"
        )
        return LiveVerdict(_outcome(Status.REFUSED, reason))

    def load(self, model: ModelEntry, route: ModelRoute) -> LiveVerdict:
        name, server = model.name, self.server
        offset, started = server.log_size(), time.monotonic()
        try:
            outcome = server.try_load(name, self.settings.load_timeout)
        except ServerError:
            return self._crashed(name, offset)
        except (UnicodeError, ValueError) as exc:  # a name gRPC cannot carry
            return LiveVerdict(_outcome(Status.REFUSED, f"cannot ask the server about '{name}': {exc}"))
        log_text = server.log_text(offset)
        if outcome.timed_out:
            return self._timed_out(name, outcome.reason, log_text, time.monotonic() - started)
        if not outcome.loaded:
            return self._refused(explain_refusal(outcome.reason, log_text, name), log_text)
        by = "stand-in" if route.route == Route.STAND_IN else "server"
        if not (model.is_ensemble and self.settings.infer and model.config is not None):
            return LiveVerdict(_outcome(Status.LOADED, None, None, by))
        request = plan_request(name, model.config, self.tasks.get(name), self.settings.inputs)
        answer = infer_once(server, model, request)
        if not server.is_alive():
            self._restart(name, "crashed the server answering a request")
        elif answer.answered and answer.wrong_answer is None:
            answer = self._prove_assets(model) or answer
        return _answered(_outcome(Status.LOADED, None, answer.answered, by), request, answer)

    def _prove_assets(self, model: ModelEntry) -> InferOutcome | None:
        """An NVCF asset step also answers through its assets, exactly as through the image bytes (a real
        JPEG both ways); None when the ensemble reads no assets or the asset path answered the same."""
        assets = asset_ensemble(model, self.repository)
        if assets is None:
            return None
        proven, why = prove_assets(self.server, model, assets, self.asset_root, self.progress)
        return None if proven else InferOutcome(False, why)

    def _crashed(self, name: str, offset: int) -> LiveVerdict:
        """The server died on this model: read why before a fresh one (with a new log) takes over."""
        log_text = self.server.log_text(offset)
        process = self.server.process
        kind, detail = classify_crash(exit_description(process.returncode if process else None), log_text)
        self.stuck[name] = "crashed the server"
        self._restart(name, self.stuck[name])
        return LiveVerdict(_outcome(_status(kind), detail))

    def _timed_out(self, name: str, said: str | None, log_text: str, waited: float) -> LiveVerdict:
        hung = said is not None and "stub" in said  # 2.51's hang on a failed stub: a layout problem
        self.stuck[name] = "hung" if hung else "timed out"
        self._restart(name, self.stuck[name])
        if hung:
            return LiveVerdict(_outcome(Status.REFUSED, _hang_reason(said, log_text)))
        reason = (
            f"'{name}' did not finish loading: waited {waited:.0f} s (--load-timeout "
            f"{self.settings.load_timeout:g}); the server was restarted"
        )
        return LiveVerdict(_outcome(Status.TIMED_OUT, reason), waited=waited)

    def _refused(self, reason: str, log_text: str) -> LiveVerdict:
        if _environment_limited(reason):
            return LiveVerdict(_outcome(Status.NOT_PROVEN, f"this server cannot load it here: {reason}"))
        kind, message = classify_failure(reason, log_text)
        return LiveVerdict(_outcome(_status(kind), message))


def _answered(result: LiveResult, request: LiveRequest, answer: InferOutcome) -> LiveVerdict:
    return LiveVerdict(result, answer.error, request=request.description, real_request=request.real,
                       wrong_answer=answer.wrong_answer)


def judge_repository(
    server: TritonServer,
    repository: Repository,
    settings: LiveSettings,
    routes: dict[str, ModelRoute] | None = None,
    progress: Progress | None = None,
    *,
    asset_root: Path | None = None,
) -> dict[str, LiveVerdict]:
    """Load every model of ``repository`` into ``server`` (a started ``TritonServer`` in explicit mode).

    The server's repository must hold ``repository``'s models (the staged copy for stand-ins). ``routes``
    (default: load everything) says which models are not proven here and are not tried. Models stay loaded.
    """
    judge = _Judge(server, repository, settings, asset_root, progress)
    verdicts: dict[str, LiveVerdict] = {}
    for model in load_order(repository):
        route = (routes or {}).get(model.name) or ModelRoute(model.name, Route.LOAD, None)
        verdicts[model.name] = _judge_one(judge, model, route, progress or _silent)
    if not judge.log_named:
        # Crashes were read from the log into the verdicts: nothing points at it, so it goes with the server
        # (kept only when a restart failed on the server itself: that reason names the log).
        server.discard_log()
    return verdicts


def _silent(_: str) -> None:
    pass


def _judge_one(judge: _Judge, model: ModelEntry, route: ModelRoute, progress: Progress) -> LiveVerdict:
    if route.route == Route.UNPROVEN:
        verdict = LiveVerdict(_outcome(Status.NOT_PROVEN, route.reason))
    elif (blocked := judge.blocked(model)) is not None:
        verdict = blocked
    else:
        progress(f"live: loading {model.name} ...")  # a load may take up to --load-timeout
        verdict = judge.load(model, route)
    progress(f"live: {model.name}: {verdict.result.verdict_text}")
    return verdict


def _diagnostic(code: LiveCode, model: ModelEntry, message: str, severity: Severity | None = None) -> Diagnostic:
    path = model.config_path if model.has_config_file else model.path
    try:
        relative = str(path.relative_to(model.path.parent))
    except ValueError:
        relative = str(path)
    return Diagnostic(
        code=code.code,
        rule=code.rule,
        severity=severity or code.severity,
        message=message,
        path=relative,
        model=model.name,
    )


def _verdict_diagnostics(summary: ModelSummary, model: ModelEntry, verdict: LiveVerdict, allow_unproven: bool, report: Report) -> list[Diagnostic]:
    reason = verdict.result.reason or "no reason given"
    status = verdict.status
    if status == Status.NOT_PROVEN:
        level = Severity.WARNING if allow_unproven else None
        return [_diagnostic(NOT_PROVEN, model, f"not proven live: {reason}", level)]
    if status == Status.MODEL_CODE_FAILED:
        return [_diagnostic(MODEL_CODE_FAILED, model, f"'{summary.name}' failed in its own code while loading: {reason}")]
    if status == Status.TIMED_OUT:
        return [_diagnostic(TIMED_OUT, model, reason)]
    out = []
    if status == Status.REFUSED:
        out.append(_diagnostic(REFUSED, model, f"tritonserver refused model '{summary.name}': {reason}"))
    if verdict.loaded != summary.ok:
        out.append(_diagnostic(DISAGREEMENT, model, disagreement_message(report, summary, verdict)))
    if verdict.result.proven_by == "stand-in":
        out.append(_diagnostic(STAND_IN, model, f"'{summary.name}' was proven through the ONNX Runtime stand-in"))
    if verdict.result.inferred is False:
        out.append(_no_answer(summary.name, model, verdict, report.repository))
    if verdict.wrong_answer is not None:
        out.append(_diagnostic(WRONG_ANSWER, model, f"ensemble '{summary.name}' answered {verdict.request} wrongly: "
                               f"{verdict.wrong_answer}"))
    return out


def _no_answer(name: str, model: ModelEntry, verdict: LiveVerdict, repository: Repository) -> Diagnostic:
    """RB903 at the step whose code failed (``STEP/1/model.py``, line) when the message says which; an
    error when the request was real, a warning (not proven) when its inputs were synthesized."""
    models = {m.name for m in repository.models}
    error = repository_frames(verdict.infer_error or "no reason given", models)
    severity = Severity.ERROR if verdict.real_request else Severity.WARNING
    message = f"ensemble '{name}' loaded but did not answer {verdict.request or 'a synthesized request'}: {error}"
    step = failing_step(error, models)
    if step is None:
        return _diagnostic(INFERENCE_FAILED, model, message, severity)
    path, line = step
    return replace(_diagnostic(INFERENCE_FAILED, model, message, severity), path=path, line=line)


def _summary_ok(summary: ModelSummary, verdict: LiveVerdict, allow_unproven: bool) -> bool:
    """A model is ok only if the server loaded it (or, with ``allow_unproven``, it could not try)."""
    if verdict.status == Status.NOT_PROVEN:
        return summary.ok and allow_unproven
    failed_real = verdict.real_request and (verdict.result.inferred is False or verdict.wrong_answer is not None)
    return summary.ok and verdict.loaded and not failed_real


def merge_verdicts(report: Report, verdicts: dict[str, LiveVerdict], *, allow_unproven: bool = False) -> Report:
    """A new report: each model summary gains ``live`` (and is not ok unless the server loaded it);
    refusals, failures, timeouts, unproven models and disagreements become diagnostics."""
    added: list[Diagnostic] = []
    summaries: list[ModelSummary] = []
    for summary in report.models:
        verdict = verdicts.get(summary.name)
        model = report.repository.model(summary.name)
        if verdict is None or model is None:
            summaries.append(summary)
            continue
        added.extend(_verdict_diagnostics(summary, model, verdict, allow_unproven, report))
        summaries.append(replace(summary, live=verdict.result, ok=_summary_ok(summary, verdict, allow_unproven)))
    order = {m.name: i for i, m in enumerate(report.repository.models)}
    diagnostics = sorted([*report.diagnostics, *added], key=lambda d: (order.get(d.model or "", -1), d.code))
    return replace(report, diagnostics=tuple(diagnostics), models=tuple(summaries))


def disagreement_message(report: Report, summary: ModelSummary, verdict: LiveVerdict) -> str:
    if verdict.loaded:
        codes = sorted({d.code for d in report.for_model(summary.name) if d.severity == Severity.ERROR})
        return f"the offline checks refused '{summary.name}' ({', '.join(codes) or 'error'}) but the server loaded it"
    return (
        f"the offline checks passed '{summary.name}' but the server refused it: "
        f"{verdict.result.reason or 'no reason given'}"
    )
