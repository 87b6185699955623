"""``validate --live`` on the embedded Triton: ONNX Runtime models proven through the stand-in, models
it cannot load reported as not proven, and each live result with its own code."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.onnx_repo_factory import onnx_config, write_onnx_model, write_onnx_repository
from support.triton_repo_factory import Ensemble, Step, Tensor, write_ensemble, write_python_model

from repo_builder.live.judge import LiveSettings, LiveVerdict, Status, merge_verdicts, validate_live
from repo_builder.validate.engine import check_repository
from repo_builder.validate.records import Severity
from repo_builder.validate.report import Report
from repo_builder.validate.scan import scan_repository

pytestmark = pytest.mark.triton

RAISING_MODEL_PY = """
def helper():
    raise RuntimeError("cannot reach the feature store")


class TritonPythonModel:
    def initialize(self, args):
        helper()

    def execute(self, requests):
        return []
"""


def _write_repository(root: Path) -> Path:
    write_onnx_repository(root)  # front (Python) -> scale (ONNX Runtime) in the ensemble 'chain'
    write_onnx_model(root, "badname", onnx_config("badname", input_name="Z"))
    engine = root / "engine"
    (engine / "1").mkdir(parents=True)
    (engine / "config.pbtxt").write_text('platform: "tensorrt_plan"\nmax_batch_size: 8\n', encoding="utf-8")
    (engine / "1" / "model.plan").write_bytes(b"not an engine")
    write_ensemble(
        root,
        Ensemble("uses_engine", (Tensor("A"),), (Tensor("B"),), (Step("engine", (("X", "A"),), (("Y", "B"),)),)),
    )
    write_python_model(root, "boom", model_py=RAISING_MODEL_PY)
    return root


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, Report, dict[Path, bytes], list[str]]:
    repo = _write_repository(tmp_path_factory.mktemp("standin") / "repo")
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    # No offline rules: every model passes offline, so RB902 shows where live and offline must differ.
    offline = check_repository(scan_repository(repo), rules=())
    lines: list[str] = []
    return offline, validate_live(offline, LiveSettings(load_timeout=30), progress=lines.append), before, lines


def _codes(report: Report, model: str) -> set[str]:
    return {d.code for d in report.for_model(model)}


def test_validate_live_answers_through_standin_when_ensemble_uses_onnx_model(judged: tuple[Report, Report, dict, list[str]]) -> None:
    _, report, _, _ = judged
    live = {m.name: m.live for m in report.models}
    assert live["scale"].loaded and live["scale"].proven_by == "stand-in"  # type: ignore[union-attr]
    assert live["chain"].loaded and live["chain"].inferred is True  # type: ignore[union-attr]
    assert _codes(report, "scale") == {"RB907"}
    (note,) = report.for_model("scale")
    assert note.severity == Severity.INFO and "stand-in" in note.message


def test_validate_live_refuses_with_onnxruntime_message_when_onnx_does_not_match_config(
    judged: tuple[Report, Report, dict, list[str]],
) -> None:
    _, report, _, _ = judged
    refused = [d for d in report.for_model("badname") if d.code == "RB901"]
    assert len(refused) == 1 and "unexpected inference input 'Z', allowed inputs are: X" in refused[0].message
    assert "At:" not in refused[0].message and "model.py(" not in refused[0].message  # no traceback
    assert "RB902" in _codes(report, "badname")  # offline said ok: an offline rule is missing


def test_validate_live_reports_not_proven_error_when_backend_missing(judged: tuple[Report, Report, dict, list[str]]) -> None:
    _, report, _, _ = judged
    for name in ("engine", "uses_engine"):
        (diagnostic,) = report.for_model(name)
        assert diagnostic.code == "RB904" and diagnostic.severity == Severity.ERROR
        assert diagnostic.message.startswith("not proven live:")
        assert report.models[[m.name for m in report.models].index(name)].live.status == Status.NOT_PROVEN  # type: ignore[union-attr]
    assert report.exit_code() == 1


def test_validate_live_reports_model_code_failure_without_disagreement_when_initialize_raises(
    judged: tuple[Report, Report, dict, list[str]],
) -> None:
    _, report, _, _ = judged
    (diagnostic,) = report.for_model("boom")
    assert diagnostic.code == "RB905"
    assert "RuntimeError: cannot reach the feature store" in diagnostic.message
    assert "model.py(3): helper" in diagnostic.message and "\n" not in diagnostic.message


def test_validate_live_counts_refused_models_as_not_ok_when_server_refuses(judged: tuple[Report, Report, dict, list[str]]) -> None:
    _, report, _, _ = judged
    ok = {m.name: m.ok for m in report.models}
    assert ok == {
        "badname": False,
        "boom": False,
        "chain": True,
        "engine": False,
        "front": True,
        "scale": True,
        "uses_engine": False,
    }


def test_merge_verdicts_makes_unproven_a_warning_when_allow_unproven(judged: tuple[Report, Report, dict, list[str]]) -> None:
    offline, report, _, _ = judged
    verdicts = {m.name: LiveVerdict(m.live) for m in report.models if m.live is not None}  # type: ignore[arg-type]
    allowed = merge_verdicts(offline, verdicts, allow_unproven=True)
    unproven = [d for d in allowed.diagnostics if d.code == "RB904"]
    assert {d.model for d in unproven} == {"engine", "uses_engine"}
    assert all(d.severity == Severity.WARNING for d in unproven)
    assert {m.name: m.ok for m in allowed.models}["engine"] is True


def test_validate_live_leaves_repository_unchanged_when_done(judged: tuple[Report, Report, dict, list[str]]) -> None:
    offline, _, before, _ = judged
    root = offline.repository.root
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert not list(root.rglob("__pycache__"))


def test_validate_live_prints_a_line_per_model_and_per_load_when_progress_given(judged: tuple[Report, Report, dict, list[str]]) -> None:
    *_, lines = judged
    verdicts = [line for line in lines if not line.startswith("live: loading ")]
    assert len(verdicts) == len(judged[0].models)  # one verdict line per model
    loads = [line for line in lines if line.startswith("live: loading ")]
    tried = {"front", "scale", "chain", "badname", "boom"}  # not the TensorRT engine nor its ensemble
    assert sorted(loads) == sorted(f"live: loading {name} ..." for name in tried)
    assert "live: scale: loaded through the ONNX Runtime stand-in" in lines
    assert "live: chain: loaded, answered a request" in lines
    assert "live: engine: not proven" in lines and "live: boom: model code failed" in lines
