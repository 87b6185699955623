"""The result of validating a repository: data only; reporters turn it into text, JSON, annotations."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from repo_builder.validate.records import GPU_TARGET, Diagnostic, Repository, Severity

if TYPE_CHECKING:
    from repo_builder.deploy_target import DeployTarget


class LiveStatus:
    """What became of one model under ``validate --live`` (``LiveResult.status``)."""

    LOADED = "loaded"
    REFUSED = "refused"  # for a configuration or layout reason
    MODEL_CODE_FAILED = "model-code-failed"  # the model's own code raised while loading
    TIMED_OUT = "timed-out"
    NOT_PROVEN = "not-proven"  # this server cannot load it here (TensorRT, no GPU, other backends)

    ALL = (LOADED, REFUSED, MODEL_CODE_FAILED, TIMED_OUT, NOT_PROVEN)


PROVEN_BY = ("server", "stand-in")  # LiveResult.proven_by when loaded: the server itself, or the ONNX stand-in


@dataclass(frozen=True)
class LiveResult:
    """What the real server said about one model (``validate --live``)."""

    loaded: bool
    reason: str | None = None  # the server's own reason when it refused
    inferred: bool | None = None  # ensembles: did one synthesized request get an answer
    status: str | None = None  # a LiveStatus value; None: only ``loaded`` is known
    proven_by: str | None = None  # a PROVEN_BY value; None when not loaded

    @property
    def status_text(self) -> str:
        """The status in words: ``loaded``, ``refused``, ``model code failed``, ..."""
        status = self.status or (LiveStatus.LOADED if self.loaded else LiveStatus.REFUSED)
        return status.replace("-", " ")

    @property
    def verdict_text(self) -> str:
        """The status with how it was proven: ``loaded through the ONNX Runtime stand-in, answered a request``."""
        if not self.loaded:
            return self.status_text
        via = " through the ONNX Runtime stand-in" if self.proven_by == "stand-in" else ""
        answered = {None: "", True: ", answered a request", False: ", did NOT answer a request"}[self.inferred]
        return f"{self.status_text}{via}{answered}"


@dataclass(frozen=True, init=False)
class ModelSummary:
    name: str
    ok: bool
    versions: tuple[int, ...]
    platform: str | None
    live: LiveResult | None = None

    # One per model of every run: written directly, as the scan's records are (a frozen dataclass's own
    # __init__ sets each field through object.__setattr__); tests/validate/test_records.py checks every field.
    def __init__(self, name: str, ok: bool, versions: tuple[int, ...], platform: str | None, live: LiveResult | None = None) -> None:
        d = self.__dict__
        d["name"], d["ok"], d["versions"], d["platform"], d["live"] = name, ok, versions, platform, live


@dataclass(frozen=True)
class Report:
    repository: Repository
    diagnostics: tuple[Diagnostic, ...]
    models: tuple[ModelSummary, ...] = field(default=())
    target: str = GPU_TARGET  # the deploy target judged for (ValidateOptions.target), e.g. "CPU-only server, ..."
    # Findings the user set aside (--ignore, --select, inline comments): listed, never counted in the verdict.
    suppressed: tuple[Diagnostic, ...] = ()
    # The image Python steps were judged in, in words, or why none was (ValidateOptions.image_text); None:
    # the report does not say (built by hand).
    image: str | None = None
    deploy: DeployTarget | None = None  # that image, when one was judged

    @property
    def ok(self) -> bool:
        return not any(d.severity == Severity.ERROR for d in self.diagnostics)

    def count(self, severity: Severity) -> int:
        return sum(1 for d in self.diagnostics if d.severity == severity)

    def for_model(self, name: str) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.model == name)

    def exit_code(self, fail_on: Severity = Severity.ERROR) -> int:
        """0 clean, 1 when there is a problem at or above ``fail_on`` (the exit code comes from here alone)."""
        levels: tuple[Severity, ...] = (Severity.ERROR,) if fail_on == Severity.ERROR else (Severity.ERROR, Severity.WARNING)
        if fail_on == Severity.INFO:
            levels = tuple(Severity)
        return 1 if any(d.severity in levels for d in self.diagnostics) else 0
