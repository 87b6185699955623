"""The engine's rule gates (``rules.GATES``) skip the ONNX, TensorRT and DALI families for models their gate
rules out. Skipping must never change a verdict: a gated rule finds nothing wherever its gate says no, and
the engine's report is the same with the gates as without them, on every one of Triton's own L0_model_config
cases and on repositories with models of each gated backend."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from repo_builder.validate.conformance import case_runs, find_suite, load_cases, materialize_case
from repo_builder.validate.engine import check_repository, judging_order
from repo_builder.validate.records import Diagnostic, ModelEntry, RuleContext, ValidateOptions
from repo_builder.validate.rules import GATES, RULES, dali, onnx_io, tensorrt
from repo_builder.validate.scan import scan_repository

SUITE = find_suite(Path(__file__))
OPTIONS = (ValidateOptions(), ValidateOptions(strict=True, gpu_present=False))


def _ungated(root: Path, options: ValidateOptions, monkeypatch: pytest.MonkeyPatch) -> tuple[Diagnostic, ...]:
    with monkeypatch.context() as m:
        m.setattr("repo_builder.validate.engine.GATES", {})
        return check_repository(scan_repository(root), options).diagnostics


def _gated_rules_silent_when_closed(root: Path, options: ValidateOptions) -> int:
    """Asserts each gated rule finds nothing for a model its gate rules out; returns how many gates opened."""
    repository = scan_repository(root)
    ctx = RuleContext(repository, options, {})
    opened = 0
    models: list[ModelEntry] = judging_order(repository)
    for model in models:
        for rule, gate in GATES.items():
            if rule.ensemble_only and not model.is_ensemble:
                continue
            if gate(model, ctx):
                opened += 1
            else:
                assert list(rule.check(model, ctx)) == [], f"{rule.code} found something for {model.name} past a closed gate"
        ctx.refused[model.name] = False
    return opened


def _same_report(root: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    opened = 0
    for options in OPTIONS:
        assert check_repository(scan_repository(root), options).diagnostics == _ungated(root, options, monkeypatch)
        opened += _gated_rules_silent_when_closed(root, options)
    return opened


def test_gates_cover_exactly_the_onnx_tensorrt_and_dali_rules() -> None:
    gated = {r.code for r in GATES}
    # RB608 also judges model_operations on other backends: never gated.
    assert gated == {r.code for module in (onnx_io, tensorrt, dali) for r in module.RULES} - {"RB608"}
    assert gated <= {r.code for r in RULES}


def _write(folder: Path, config: str, files: dict[str, bytes]) -> None:
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(config)
    for name, data in files.items():
        (folder / "1" / name).write_bytes(data)


IO = 'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }] output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]'


def test_report_is_the_same_without_gates_when_every_gated_backend_is_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "models"
    _write(root / "onnx_bad", f'backend: "onnxruntime" max_batch_size: 4 {IO}', {"model.onnx": b"<html>not onnx</html>"})
    _write(root / "trt", f'platform: "tensorrt_plan" max_batch_size: 4 instance_group [{{ kind: KIND_CPU }}] {IO}', {"model.plan": b"x" * 64})
    _write(root / "dali", f'backend: "dali" default_model_filename: "my pipe.dali" {IO}', {"my pipe.dali": b"\x00\x01"})
    _write(root / "py", f'backend: "python" {IO}', {"model.py": b"class TritonPythonModel:\n    def execute(self, r): return r\n"})
    _write(root / "named.onnx", "", {})  # the backend from the model name
    (root / "bare" / "1").mkdir(parents=True)  # no config: auto-complete from the file names
    (root / "bare" / "1" / "model.plan").write_bytes(b"y" * 32)
    opened = _same_report(root, monkeypatch)
    assert opened > 0  # the gated families ran where they apply
    codes = {d.code for d in check_repository(scan_repository(root), OPTIONS[1]).diagnostics}
    assert {"RB601", "RB411"} & codes  # findings from gated families are still reported


@pytest.mark.skipif(SUITE is None, reason="shared/conformance/triton-qa not found (set REPO_BUILDER_CONFORMANCE)")
def test_report_is_the_same_without_gates_on_every_triton_conformance_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert SUITE is not None
    runs = [run for case in load_cases(SUITE) for run in case_runs(case)]
    assert runs
    for i, run in enumerate(runs):
        root = materialize_case(run, tmp_path / f"case{i}")
        _same_report(root, monkeypatch)
        shutil.rmtree(root)
