from pathlib import Path

from repo_builder.validate.engine import check_repository
from repo_builder.validate.model import Finding, Severity, rule
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
