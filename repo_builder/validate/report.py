"""The result of validating a repository: data only; reporters turn it into text, JSON, annotations."""

from __future__ import annotations

from dataclasses import dataclass, field

from repo_builder.validate.records import Diagnostic, Repository, Severity


@dataclass(frozen=True)
class LiveResult:
    """What the real server said about one model (``validate --live``)."""

    loaded: bool
    reason: str | None = None  # the server's own reason when it refused
    inferred: bool | None = None  # ensembles: did one synthesized request get an answer


@dataclass(frozen=True)
class ModelSummary:
    name: str
    ok: bool
    versions: tuple[int, ...]
    platform: str | None
    live: LiveResult | None = None


@dataclass(frozen=True)
class Report:
    repository: Repository
    diagnostics: tuple[Diagnostic, ...]
    models: tuple[ModelSummary, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not any(d.severity == Severity.ERROR for d in self.diagnostics)

    def count(self, severity: Severity) -> int:
        return sum(1 for d in self.diagnostics if d.severity == severity)

    def for_model(self, name: str) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.model == name)

    def exit_code(self, fail_on: Severity = Severity.ERROR) -> int:
        """0 clean, 1 when there is a problem at or above ``fail_on`` (the exit code comes from here alone)."""
        levels = (Severity.ERROR,) if fail_on == Severity.ERROR else (Severity.ERROR, Severity.WARNING)
        if fail_on == Severity.INFO:
            levels = tuple(Severity)
        return 1 if any(d.severity in levels for d in self.diagnostics) else 0
