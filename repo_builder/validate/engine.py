"""Scan once, run every registered rule, collect diagnostics into a ``Report``."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import cast

from repo_builder.validate.analysis.bounded import bounded_text
from repo_builder.validate.analysis.deploy import deploy_options
from repo_builder.validate.analysis.ensemble_graph import member_names
from repo_builder.validate.analysis.manifest import manifest
from repo_builder.validate.analysis.positions import finding_position
from repo_builder.validate.analysis.quiet import QuietFlags, quiet_flags
from repo_builder.validate.analysis.resolve import resolve_backend
from repo_builder.validate.records import (
    CheckFn,
    Diagnostic,
    Finding,
    ModelEntry,
    Repository,
    RepositoryCheckFn,
    Rule,
    RuleContext,
    Severity,
    ValidateOptions,
)
from repo_builder.validate.report import ModelSummary, Report
from repo_builder.validate.rules import GATES, RULES, Gate
from repo_builder.validate.rules.repository import INTEGRITY_CODES
from repo_builder.validate.scan import scan_repository


def _relative(path: Path | str | None, model: ModelEntry | None, root: Path) -> str:
    if path is None:
        target = root if model is None else (model.config_path if model.has_config_file else model.path)
    else:
        target = Path(path)
    if not target.is_absolute():
        target = (root if model is None else model.path) / target
    try:
        return str(target.relative_to(root))
    except ValueError:
        return str(target)


def _position(rule: Rule, f: Finding, model: ModelEntry | None) -> tuple[int | None, int | None]:
    """Line and column: the finding's own, else where its config field is written in config.pbtxt."""
    if f.line is not None or model is None or model.config_text is None:
        return f.line, f.column
    if f.path is not None and Path(f.path) != model.config_path:
        return None, None
    found = finding_position(model.config_text, f.message, f.field or rule.field)
    return found if found is not None else (None, None)


def _diagnostic(rule: Rule, f: Finding, model: ModelEntry | None, root: Path) -> Diagnostic:
    line, column = _position(rule, f, model)
    return Diagnostic(
        code=rule.code,
        rule=rule.name,
        severity=f.severity or rule.severity,
        message=f.message,
        path=_relative(f.path, model, root),
        model=model.name if model is not None else None,
        version=f.version,
        hint=bounded_text(f.hint),
        line=line,
        column=column if line is not None else None,
    )


_by_name = operator.attrgetter("name")


def judging_order(repository: Repository) -> list[ModelEntry]:
    """Members before the ensembles that use them (nested ensembles too), so ensemble rules can ask
    whether a member was refused. Cycles are left to the cycle rule: their models come last, by name."""
    plain = sorted((m for m in repository.models if not m.is_ensemble), key=_by_name)
    pending = {m.name: m for m in repository.models if m.is_ensemble}
    done = {m.name for m in plain}
    ordered = list(plain)
    while pending:
        ready = sorted(
            name
            for name, m in pending.items()
            # the steps' members as the ensemble rules read them (kept on the entry: read from protobuf once)
            if all(n in done or n not in pending for n in member_names(m))
        )
        if not ready:  # a cycle: judge what remains in name order
            ready = sorted(pending)
        for name in ready:
            ordered.append(pending.pop(name))
            done.add(name)
    return ordered


def _summary(model: ModelEntry, refused: dict[str, bool]) -> ModelSummary:
    # The platform as Triton resolves it (from the files too), so a config-less model is not shown as "-".
    platform = None if model.problem is not None else resolve_backend(model).shown
    return ModelSummary(model.name, not refused[model.name], model.version_numbers, platform)


def _with_deploy_target(ctx: RuleContext) -> RuleContext:
    """The context with the image Python steps are judged in decided (the flags', else the manifest's);
    the manifest read here is the one the manifest rules use (kept in the context's facts)."""
    options = deploy_options(ctx.options, manifest(ctx))
    if options == ctx.options:
        return ctx
    judged = RuleContext(ctx.repository, options, ctx.refused)
    judged.facts.update(ctx.facts)
    return judged


Segment = tuple[Gate | None, tuple[tuple[Rule, CheckFn], ...]]


def _segments(rules: list[Rule]) -> tuple[Segment, ...]:
    """The rules in order, runs of neighbours with the same family gate (or none) together: the gate is
    asked once per run, not once per rule."""
    out: list[tuple[Gate | None, list[tuple[Rule, CheckFn]]]] = []
    for r in rules:
        gate = GATES.get(r)
        if not out or out[-1][0] is not gate:
            out.append((gate, []))
        out[-1][1].append((r, r.check))
    return tuple((gate, tuple(segment)) for gate, segment in out)


Plan = tuple[Segment, ...]
_first = operator.itemgetter(0)  # a (field descriptor, value) pair's descriptor


def config_sections(model: ModelEntry) -> frozenset[str] | None:
    """The top-level fields the model's parsed config sets (None without one: then every rule runs)."""
    cfg = model.config
    return None if cfg is None else frozenset(f.name for f, _ in cfg.ListFields())


def section_open(rule: Rule, sections: frozenset[str] | None) -> bool:
    """Whether a rule can find anything in a config setting ``sections`` (its declared ``Rule.sections``)."""
    return not rule.sections or sections is None or not rule.sections.isdisjoint(sections)


def not_quiet(rule: Rule, flags: QuietFlags) -> bool:
    """Whether a rule can find anything in a model with these ``QuietFlags`` (its declared ``Rule.quiet``)."""
    return rule.quiet is None or not getattr(flags, rule.quiet)


def check_repository(repository: Repository, options: ValidateOptions | None = None, rules: tuple[Rule, ...] | None = None) -> Report:
    """Judge a scanned repository: the repository as a whole, then members, then ensembles, which see
    their members' verdicts."""
    rules = RULES if rules is None else rules
    options = options or ValidateOptions()
    refused: dict[str, bool] = {}
    ctx = _with_deploy_target(RuleContext(repository, options, refused))
    options = ctx.options
    root = repository.root
    diagnostics: list[Diagnostic] = [
        _diagnostic(r, f, None, root) for r in rules if r.repository_level for f in cast(RepositoryCheckFn, r.check)(ctx)
    ]
    # About 55 rules per model and most find nothing: the loop stays lean, a Diagnostic is built only
    # for an actual finding.
    every = [r for r in rules if not r.repository_level]
    plain = [r for r in every if not r.ensemble_only]
    # Most models set few of the config's sections: the rules a model's sections leave open, planned once
    # per distinct set (a repository has a handful), skip the rest without a call.
    # Keyed by the field descriptors ListFields gives (in field order: one tuple per set), their names read
    # only when a new set needs planning.
    # The model's QuietFlags join the key: a clean model's plan leaves out the rules they say find nothing.
    plans: dict[tuple[bool, tuple[object, ...] | None, QuietFlags], Plan] = {}
    # A folder that is not a repository (a model folder, an export): its subfolders are no models, and
    # judging them would only bury the one diagnostic that says what to pass instead.
    wrong_folder = any(d.severity == Severity.ERROR for d in diagnostics)
    for model in () if wrong_folder else judging_order(repository):
        found: list[Diagnostic] = []
        gates: dict[Gate, bool] = {}  # each family's gate, asked once for this model
        cfg = model.config
        flags = quiet_flags(model, ctx)
        key = (model.is_ensemble, None if cfg is None else tuple(map(_first, cfg.ListFields())), flags)
        plan = plans.get(key)
        if plan is None:
            sections = config_sections(model)
            plan = plans[key] = _segments(
                [r for r in (every if key[0] else plain) if section_open(r, sections) and not_quiet(r, flags)]
            )
        for gate, segment in plan:
            if gate is not None:
                open_ = gates.get(gate)
                if open_ is None:
                    open_ = gates[gate] = gate(model, ctx)
                if not open_:
                    continue
            for r, check in segment:
                for f in check(model, ctx):
                    found.append(_diagnostic(r, f, model, root))
        # An integrity finding (changed since build) fails the gate but is no refusal: Triton loads the model.
        refused[model.name] = bool(found) and any(d.severity == Severity.ERROR and d.code not in INTEGRITY_CODES for d in found)
        diagnostics.extend(found)
    summaries = tuple(_summary(m, refused) for m in repository.models) if not wrong_folder else ()
    order = {m.name: i for i, m in enumerate(repository.models)}
    diagnostics.sort(key=lambda d: (order.get(d.model or "", -1), d.code))
    return Report(
        repository=repository,
        diagnostics=tuple(diagnostics),
        models=summaries,
        target=options.target,
        image=options.image_text,
        deploy=options.deploy,
    )


def validate_repository(location: str | Path, options: ValidateOptions | None = None) -> Report:
    """The library entry point behind ``repo-builder validate``."""
    return check_repository(scan_repository(location), options)
