"""``validate --live``: load every model into a real tritonserver and hold the offline verdict against it.

Members first, then ensembles (in dependency order), one explicit-mode load each with a timeout. Triton
2.51 hangs for good on a Python model whose ``model.py`` is missing: such a load is reported as refused,
the server is restarted, and ensembles that need that model are reported refused without asking again.
Each ensemble that loads gets one request synthesized from its config; whether it answered is recorded.

Codes this adds to the report (``LIVE_CODES``; docs/rules.md includes them):

- RB901 ``server-refused-model`` (error): the server refused the model; the message is the server's own
  reason (for "failed to poll from model repository", the real reason from its log).
- RB902 ``offline-live-disagreement`` (warning): the offline checks and the server disagree on the model;
  the message says which way. The server is right: report it as a bug in the offline rule.
- RB903 ``live-inference-failed`` (warning): the ensemble loaded but did not answer one request
  synthesized from its config (the server's message says why; synthesized values may not suit every
  model, e.g. an image decoder given text).
- RB904 ``live-not-judged`` (warning): this server cannot judge the model on this machine (its backend is
  not installed, e.g. the embedded Triton has only the Python backend, or it needs a GPU): run
  ``validate --live --tritonserver PATH`` with a full Triton (the NGC container) on the target hardware.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from repo_builder.validate.records import Diagnostic, ModelEntry, Repository, Severity
from repo_builder.validate.report import LiveResult, ModelSummary, Report

if TYPE_CHECKING:
    from repo_builder.triton.server import TritonServer


@dataclass(frozen=True)
class LiveCode:
    code: str
    rule: str
    severity: Severity
    doc: str


REFUSED = LiveCode(
    "RB901",
    "server-refused-model",
    Severity.ERROR,
    "The real tritonserver refused to load the model. The message is the server's reason (from its log "
    "when the client only hears 'failed to poll from model repository').",
)
DISAGREEMENT = LiveCode(
    "RB902",
    "offline-live-disagreement",
    Severity.WARNING,
    "The offline checks and the real server reached different verdicts on the model; the message says "
    "which way. The server is the referee: an offline rule is missing or wrong.",
)
INFERENCE_FAILED = LiveCode(
    "RB903",
    "live-inference-failed",
    Severity.WARNING,
    "The ensemble loaded but did not answer one request whose inputs were synthesized from its config "
    "(shapes with -1 made small, the configured data types, short text for TYPE_STRING, a tiny PNG for "
    "encoded-image inputs).",
)
NOT_JUDGED = LiveCode(
    "RB904",
    "live-not-judged",
    Severity.WARNING,
    "The server at hand cannot judge the model on this machine: its backend is not installed (the "
    "embedded Triton of nvidia-pytriton has only the Python backend) or it needs a GPU. Run validate "
    "--live --tritonserver PATH with a full Triton on the target hardware to judge it.",
)
LIVE_CODES: tuple[LiveCode, ...] = (REFUSED, DISAGREEMENT, INFERENCE_FAILED, NOT_JUDGED)

# Refusals that say something about this machine or server build, not about the repository.
_ENVIRONMENT_LIMITS = ("unable to find backend library", "no gpus are available", "no gpu")
_LOG_LINE = re.compile(r'^(?P<level>[IEW])\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\]\s+"?(?P<message>.*?)"?$')


@dataclass(frozen=True)
class LiveSettings:
    tritonserver: str | None = None  # --tritonserver PATH; default: see repo_builder.triton.locate
    load_timeout: float = 60.0  # seconds per model load
    infer: bool = True  # send one synthesized request to each ensemble that loads
    strict: bool = False  # --strict: the server runs with --disable-auto-complete-config
    startup_timeout: float = 60.0


@dataclass(frozen=True)
class LiveVerdict:
    """The server's word on one model, with what the report needs beyond ``LiveResult``."""

    result: LiveResult
    infer_error: str | None = None  # why the synthesized request failed
    judged: bool = True  # False when the machine or server build cannot judge the model

    @property
    def loaded(self) -> bool:
        return self.result.loaded


def validate_live(report: Report, settings: LiveSettings) -> Report:
    """Load the report's repository into an embedded server; return the report with live verdicts added."""
    from repo_builder.triton.server import start_server

    with start_server(
        report.repository.root,
        mode="explicit",
        tritonserver=settings.tritonserver,
        strict=settings.strict,
        startup_timeout=settings.startup_timeout,
    ) as server:
        verdicts = judge_repository(server, report.repository, settings)
    return merge_verdicts(report, verdicts)


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


def step_models(model: ModelEntry) -> set[str]:
    if model.config is None:
        return set()
    return {s.model_name for s in model.config.ensemble_scheduling.step}


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


def log_messages(text: str, levels: str = "EW") -> list[str]:
    """The messages of a tritonserver log excerpt's lines of the given levels (I, W, E)."""
    out = []
    for line in text.splitlines():
        match = _LOG_LINE.match(line.strip())
        if match and match.group("level") in levels:
            out.append(match.group("message").replace('\\"', '"'))
    return out


def explain_refusal(message: str | None, log_text: str, name: str) -> str:
    """The server's reason: its load error, or, when that only says 'failed to poll', the log's."""
    message = (message or "").strip()
    if not message or "failed to poll from model repository" in message:
        for entry in log_messages(log_text):
            prefix = f"Poll failed for model directory '{name}': "
            if entry.startswith(prefix):
                return entry[len(prefix) :]
        for entry in log_messages(log_text):
            if f"'{name}'" in entry and "ignore version directory" not in entry:
                return entry
    message = message.removeprefix(f"load failed for model '{name}': ").rstrip("; ")
    return message or f"failed to load '{name}' (no reason in the log)"


def _hang_reason(said: str | None, log_text: str) -> str:
    logged = [
        e for e in log_messages(log_text, "IEW") if "preinitialize" in e.lower() or "not found" in e.lower()
    ]
    why = f"; the server logged: {logged[-1].strip()}" if logged else ""
    return f"{said or 'the load did not finish'} (the server was restarted){why}"


def _environment_limited(reason: str | None) -> bool:
    lower = (reason or "").lower()
    return any(s in lower for s in _ENVIRONMENT_LIMITS)


def judge_repository(
    server: TritonServer, repository: Repository, settings: LiveSettings
) -> dict[str, LiveVerdict]:
    """Load every model of ``repository`` into ``server`` (a started ``TritonServer`` in explicit mode).

    The server's repository must be ``repository.root``. Models stay loaded afterwards.
    """
    from repo_builder.triton.server import ServerError

    verdicts: dict[str, LiveVerdict] = {}
    # Models whose load hung or crashed the server: an ensemble using one would do it again.
    stuck: dict[str, str] = {}
    for model in load_order(repository):
        name = model.name
        if model.is_ensemble and (member := _needs(model, repository, set(stuck))) is not None:
            reason = (
                f"ensemble '{name}' depends on '{member}' which has no loaded version: its load "
                f"{stuck[member]} (not tried again)"
            )
            verdicts[name] = LiveVerdict(LiveResult(False, reason, None))
            continue
        offset = server.log_size()
        try:
            outcome = server.try_load(name, settings.load_timeout)
        except ServerError as exc:
            # The server crashed on this model: that is a refusal too; carry on with a fresh one.
            verdicts[name] = LiveVerdict(
                LiveResult(False, f"tritonserver died while loading it: {exc}", None)
            )
            stuck[name] = "crashed the server"
            server.restart()
            continue
        except (UnicodeError, ValueError) as exc:  # a name gRPC cannot carry
            verdicts[name] = LiveVerdict(LiveResult(False, f"cannot ask the server about '{name}': {exc}"))
            continue
        log_text = server.log_text(offset)
        if outcome.timed_out:
            stuck[name] = "hung"
            verdicts[name] = LiveVerdict(LiveResult(False, _hang_reason(outcome.reason, log_text)))
            server.restart()
            continue
        if not outcome.loaded:
            reason = explain_refusal(outcome.reason, log_text, name)
            verdicts[name] = LiveVerdict(
                LiveResult(False, reason, None), judged=not _environment_limited(reason)
            )
            continue
        inferred, infer_error = None, None
        if model.is_ensemble and settings.infer and model.config is not None:
            inferred, infer_error = infer_once(server, model)
            if not server.is_alive():
                server.restart()
        verdicts[name] = LiveVerdict(LiveResult(True, None, inferred), infer_error)
    return verdicts


def infer_once(server: TritonServer, model: ModelEntry) -> tuple[bool, str | None]:
    """Send one synthesized request; (answered, the server's message when it did not)."""
    from repo_builder.triton.client import error_text
    from repo_builder.triton.server import ServerError
    from repo_builder.triton.synthesize import synthesize_inputs

    inputs = synthesize_inputs(model.config)
    try:
        server.infer(
            model.name,
            {i.name: i.array for i in inputs},
            datatypes={i.name: i.wire for i in inputs},
            timeout=60.0,
        )
    except ServerError as exc:
        return False, f"tritonserver died while answering: {exc}"
    except Exception as exc:
        return False, error_text(exc)
    return True, None


def _diagnostic(
    code: LiveCode, model: ModelEntry, message: str, severity: Severity | None = None
) -> Diagnostic:
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


def merge_verdicts(report: Report, verdicts: dict[str, LiveVerdict]) -> Report:
    """A new report: each model summary gains ``live``; refusals and disagreements become diagnostics."""
    added: list[Diagnostic] = []
    summaries: list[ModelSummary] = []
    for summary in report.models:
        verdict = verdicts.get(summary.name)
        model = report.repository.model(summary.name)
        if verdict is None or model is None:
            summaries.append(summary)
            continue
        summaries.append(replace(summary, live=verdict.result))
        reason = verdict.result.reason or "no reason given"
        if not verdict.judged:
            added.append(_diagnostic(NOT_JUDGED, model, f"not judged live: {reason}"))
            continue
        if not verdict.loaded:
            added.append(
                _diagnostic(REFUSED, model, f"tritonserver refused model '{summary.name}': {reason}")
            )
        if verdict.loaded != summary.ok:
            added.append(_diagnostic(DISAGREEMENT, model, disagreement_message(report, summary, verdict)))
        if verdict.result.inferred is False:
            added.append(
                _diagnostic(
                    INFERENCE_FAILED,
                    model,
                    f"ensemble '{summary.name}' loaded but did not answer a synthesized request: "
                    f"{verdict.infer_error or 'no reason given'}",
                )
            )
    order = {m.name: i for i, m in enumerate(report.repository.models)}
    diagnostics = sorted([*report.diagnostics, *added], key=lambda d: (order.get(d.model or "", -1), d.code))
    return replace(report, diagnostics=tuple(diagnostics), models=tuple(summaries))


def disagreement_message(report: Report, summary: ModelSummary, verdict: LiveVerdict) -> str:
    if verdict.loaded:
        codes = sorted({d.code for d in report.for_model(summary.name) if d.severity == Severity.ERROR})
        return (
            f"the offline checks refused '{summary.name}' ({', '.join(codes) or 'error'}) "
            "but the server loaded it"
        )
    return (
        f"the offline checks passed '{summary.name}' but the server refused it: "
        f"{verdict.result.reason or 'no reason given'}"
    )
