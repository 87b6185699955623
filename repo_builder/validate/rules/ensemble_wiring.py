"""Rules RB5xx: ensembles, stages one and two (their own config and data flow, then their members).

Core: ``ValidateEnsembleSchedulingConfig``, the dependency graph of ``model_repository_manager.cc`` and
``ensemble_utils.cc``, with Triton's own texts. A later stage is only judged when the earlier ones pass,
so one mistake yields one diagnostic, not a cascade. The tensors are judged in ensemble_types.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from repo_builder.validate.analysis.bounded import name_list
from repo_builder.validate.analysis.ensemble_graph import (
    SCHEDULING,
    config_ok,
    cycle,
    cycle_finding,
    data_flow_findings,
    located,
    member_finding,
    member_names,
    members_ok,
    missing_members,
    refused_members,
    scheduling_findings,
    scheduling_problems,
    version_problems,
)
from repo_builder.validate.analysis.resolve import ENSEMBLE, config_name
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, rule


@rule("RB501", "ensemble-scheduling-platform", field="ensemble_scheduling", sections=("ensemble_scheduling",), quiet="ensemble_clean")
def check_scheduling_platform(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Only a model with `platform: "ensemble"` may have `ensemble_scheduling`.

    Triton: "ensemble scheduling cannot be set for model 'M' whose platform is not ensemble".

    Fails: `backend: "python"` with an `ensemble_scheduling` block. Passes: `platform: "ensemble"`.
    """
    cfg = model.config
    if cfg is not None and cfg.HasField("ensemble_scheduling") and cfg.platform != ENSEMBLE:
        yield located(  # at the block itself: the quoted model name would place it on `name:`
            model,
            f"ensemble scheduling cannot be set for model '{config_name(model)}' whose platform is not {ENSEMBLE}",
            SCHEDULING,
        )


@rule("RB502", "ensemble-config", ensemble_only=True, field="ensemble_scheduling", quiet="ensemble_clean")
def check_ensemble_config(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """An ensemble has `ensemble_scheduling` with steps, and no per-instance settings.

    Triton: "ensemble scheduling must be set for ensemble E whose platform is ensemble", "instance group should not be
    specified for ensemble 'E'", "optimization should not be specified ...", "model_warmup can not be
    specified ...", "must specify 'step' for ensemble 'E'", "must specify 'model_name' | 'input_map' |
    'output_map' in step N of ensemble 'E'" (steps count from 0). A `backend:` on an ensemble is RB403.

    Fails: an ensemble with `instance_group [ { kind: KIND_CPU } ]`. Passes: remove it (the members
    have instances; the ensemble has none).
    """
    yield from scheduling_findings(model)


@rule("RB503", "ensemble-data-flow", ensemble_only=True, field="ensemble_scheduling", quiet="ensemble_clean")
def check_data_flow(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Every ensemble input feeds a step, every output is written, and every tensor flows somewhere.

    Triton: "ensemble tensor 'T' can appear in an output map only once for ensemble 'E' step N",
    "ensemble input 'X' for ensemble E' is not used", "ensemble output 'Y' for ensemble E' is not used",
    "output 'Y' for ensemble 'E' is not written[: at least one of its depending tensors, 'T', is not
    connected]", "ensemble tensor 'T' is unused in ensemble 'E'" (a tensor nobody reads, or one that can
    never be computed from the inputs).

    Fails: an output `prob` that no step's `output_map` writes. Passes: a step maps a member output to `prob`.
    """
    if scheduling_problems(model):
        return
    yield from data_flow_findings(model)


@rule("RB504", "ensemble-members-exist", ensemble_only=True, field="model_name", quiet="ensemble_clean")
def check_members_exist(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Every step's `model_name` is a model folder of the repository.

    Triton: "ensemble E contains models that are not available or ambiguous: M1, M2".

    Fails: a step naming `preprocess` with no `preprocess/` folder. Passes: the folder exists.
    """
    if members_ok(model, ctx):  # stage two passed: none of its parts has anything to report
        return
    if not config_ok(model):
        return
    missing = missing_members(model, ctx)
    if missing:
        first = next(n for n in member_names(model) if n in missing)  # placed at the first step naming one
        yield member_finding(
            model,
            f"ensemble {config_name(model)} contains models that are not available or ambiguous: {name_list(missing)}",
            first,
            hint="model_name must equal a model folder name in this repository",
        )


@rule("RB505", "ensemble-cycles", ensemble_only=True, field="model_name", quiet="ensemble_clean")
def check_cycles(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Ensembles may contain ensembles, but never themselves, directly or through others.

    Triton: "circular dependency between ensembles: A -> ... -> B -> A".

    Fails: ensemble `a` has a step `b`, ensemble `b` a step `a`. Passes: `b` uses a plain model.
    """
    if members_ok(model, ctx):  # stage two passed: none of its parts has anything to report
        return
    if not config_ok(model):
        return
    found = cycle_finding(model, ctx)
    if found is not None:
        yield found


@rule("RB506", "ensemble-member-versions", ensemble_only=True, field="model_version", quiet="ensemble_clean")
def check_member_versions(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A step's `model_version` is -1 (latest loaded) or a version Triton loads for that member.

    Triton: "ensemble 'E' depends on 'M' whose required version V is not loaded." The loaded versions
    follow the member's `version_policy` (default: only the latest). An omitted `model_version` is 0,
    not "latest": it needs a version folder named `0`; write `model_version: -1`.

    Fails: `model_version: 2` while the member only has `1/`. Passes: `model_version: -1`.
    """
    if members_ok(model, ctx):  # stage two passed: none of its parts has anything to report
        return
    if not config_ok(model) or missing_members(model, ctx):
        return
    yield from version_problems(model, ctx)


@rule("RB507", "ensemble-member-refused", ensemble_only=True, field="model_name", quiet="ensemble_clean")
def check_member_refused(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """An ensemble whose member Triton refuses is refused too.

    Triton: "ensemble 'E' depends on 'M' which is not valid. Model 'M' failed with error: ...". The
    member's own diagnostics say why; members are judged before their ensembles.

    Fails: a member with a config error. Passes: every member validates cleanly.
    """
    if members_ok(model, ctx):  # stage two passed: none of its parts has anything to report
        return
    if not config_ok(model) or missing_members(model, ctx) or cycle(model, ctx):
        return
    name = config_name(model)
    for member in refused_members(model, ctx):
        yield member_finding(
            model,
            f"ensemble '{name}' depends on '{member}' which is not valid",
            member,
            hint=f"fix the errors reported for model '{member}'",
        )


RULES: tuple[Rule, ...] = (
    check_scheduling_platform,
    check_ensemble_config,
    check_data_flow,
    check_members_exist,
    check_cycles,
    check_member_versions,
    check_member_refused,
)
