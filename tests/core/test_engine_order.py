from pathlib import Path

from repo_builder.validate.engine import check_repository
from repo_builder.validate.records import Finding, Severity, rule
from repo_builder.validate.scan import scan_repository


def _repo(tmp_path: Path) -> Path:
    for name, text in {
        "member": 'name: "member"\nbackend: "python"\n',
        "ens": 'name: "ens"\nplatform: "ensemble"\n',
    }.items():
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(text)
    return tmp_path


def test_engine_judges_members_before_ensembles_when_rules_depend_on_verdicts(tmp_path: Path) -> None:
    @rule("RB990", "always-refuse-member")
    def refuse(model, ctx):
        """Test rule: refuses the model named member."""
        if model.name == "member":
            yield Finding("member refused")

    @rule("RB991", "ensemble-sees-member", ensemble_only=True)
    def see(model, ctx):
        """Test rule: reports what the ensemble saw of its member."""
        yield Finding(f"member refused={ctx.refused.get('member')}", severity=Severity.INFO)

    report = check_repository(scan_repository(_repo(tmp_path)), rules=(refuse, see))
    messages = {d.model: d.message for d in report.diagnostics}
    assert messages == {"member": "member refused", "ens": "member refused=True"}
    assert not report.ok
    assert report.exit_code() == 1
    summary = {m.name: m.ok for m in report.models}
    assert summary == {"ens": True, "member": False}
    assert [d.path for d in report.diagnostics] == ["ens/config.pbtxt", "member/config.pbtxt"]


def test_report_exit_code_counts_warnings_only_when_asked(tmp_path: Path) -> None:
    @rule("RB992", "always-warn", Severity.WARNING)
    def warn(model, ctx):
        """Test rule: warns on every model."""
        yield Finding("careful")

    report = check_repository(scan_repository(_repo(tmp_path)), rules=(warn,))
    assert report.ok
    assert report.exit_code() == 0
    assert report.exit_code(Severity.WARNING) == 1


def test_engine_orders_nested_ensembles_after_their_inner_ensemble_when_names_sort_first(tmp_path: Path) -> None:
    from repo_builder.validate.engine import judging_order

    configs = {
        "a_outer": 'name: "a_outer"\nplatform: "ensemble"\nensemble_scheduling { step [{model_name: "b_inner"}] }\n',
        "b_inner": 'name: "b_inner"\nplatform: "ensemble"\nensemble_scheduling { step [{model_name: "c_leaf"}] }\n',
        "c_leaf": 'name: "c_leaf"\nbackend: "python"\n',
    }
    for name, text in configs.items():
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(text)
    order = [m.name for m in judging_order(scan_repository(tmp_path))]
    assert order == ["c_leaf", "b_inner", "a_outer"]
