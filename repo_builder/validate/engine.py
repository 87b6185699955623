"""Scan once, run every registered rule, collect diagnostics into a ``Report``."""

from __future__ import annotations

from pathlib import Path

from repo_builder.validate.records import (
    Diagnostic,
    Finding,
    ModelEntry,
    Repository,
    Rule,
    RuleContext,
    Severity,
    ValidateOptions,
)
from repo_builder.validate.report import ModelSummary, Report
from repo_builder.validate.scan import scan_repository


def _relative(path: Path | str | None, model: ModelEntry, root: Path) -> str:
    target = Path(path) if path is not None else (model.config_path if model.has_config_file else model.path)
    if not target.is_absolute():
        target = model.path / target
    try:
        return str(target.relative_to(root))
    except ValueError:
        return str(target)


def _diagnostic(rule: Rule, f: Finding, model: ModelEntry, root: Path) -> Diagnostic:
    return Diagnostic(
        code=rule.code,
        rule=rule.name,
        severity=f.severity or rule.severity,
        message=f.message,
        path=_relative(f.path, model, root),
        model=model.name,
        version=f.version,
        hint=f.hint,
        line=f.line,
        column=f.column,
    )


def judging_order(repository: Repository) -> list[ModelEntry]:
    """Members before the ensembles that use them (nested ensembles too), so ensemble rules can ask
    whether a member was refused. Cycles are left to the cycle rule: their models come last, by name."""
    plain = sorted((m for m in repository.models if not m.is_ensemble), key=lambda m: m.name)
    pending = {m.name: m for m in repository.models if m.is_ensemble}
    done = {m.name for m in plain}
    ordered = list(plain)
    while pending:
        ready = sorted(
            name
            for name, m in pending.items()
            if all(s.model_name in done or s.model_name not in pending for s in m.config.ensemble_scheduling.step)
        )
        if not ready:  # a cycle: judge what remains in name order
            ready = sorted(pending)
        for name in ready:
            ordered.append(pending.pop(name))
            done.add(name)
    return ordered


def check_repository(repository: Repository, options: ValidateOptions | None = None, rules: tuple[Rule, ...] | None = None) -> Report:
    """Judge a scanned repository: members first, then ensembles, which see their members' verdicts."""
    if rules is None:
        from repo_builder.validate.rules import RULES

        rules = RULES
    options = options or ValidateOptions()
    diagnostics: list[Diagnostic] = []
    refused: dict[str, bool] = {}
    ctx = RuleContext(repository, options, refused)
    root = repository.root
    # About 55 rules per model and most find nothing: the loop stays lean, a Diagnostic is built only
    # for an actual finding.
    every = tuple((r, r.check) for r in rules)
    plain = tuple((r, check) for r, check in every if not r.ensemble_only)
    for model in judging_order(repository):
        found: list[Diagnostic] = []
        for r, check in every if model.is_ensemble else plain:
            for f in check(model, ctx):
                found.append(_diagnostic(r, f, model, root))
        refused[model.name] = any(d.severity == Severity.ERROR for d in found)
        diagnostics.extend(found)
    summaries = tuple(
        ModelSummary(
            name=m.name,
            ok=not refused[m.name],
            versions=m.version_numbers,
            platform=(m.config.platform or m.config.backend or None) if m.config is not None else None,
        )
        for m in repository.models
    )
    order = {m.name: i for i, m in enumerate(repository.models)}
    diagnostics.sort(key=lambda d: (order.get(d.model or "", -1), d.code))
    return Report(repository=repository, diagnostics=tuple(diagnostics), models=summaries)


def validate_repository(location: str | Path, options: ValidateOptions | None = None) -> Report:
    """The library entry point behind ``repo-builder validate``."""
    return check_repository(scan_repository(location), options)
