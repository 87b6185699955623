"""The engine's per-section gates (``Rule.sections``): a rule is skipped for a parsed config that sets none of
the top-level fields it declares; and its quiet flags (``Rule.quiet``): a rule is skipped for a model whose
``QuietFlags`` say it has nothing to find. A wrong declaration would silently stop a rule checking, so this
compares, over the validate corpus (Triton's own L0_model_config cases, validate_speed.py's generated
repository and a repository setting every gated section and flag wrongly), each gated rule called past its
closed gate (it must find nothing) and the engine's whole report against calling every rule, with no gate at
all."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from support.validate_repo_helpers import onnx_bytes, onnx_config
from tritonclient.grpc import model_config_pb2

from repo_builder.deploy_target import resolve_target
from repo_builder.validate.analysis.quiet import QuietFlags, quiet_flags
from repo_builder.validate.conformance import case_runs, find_suite, load_cases, materialize_case
from repo_builder.validate.engine import (
    check_repository,
    config_sections,
    judging_order,
    not_quiet,
    section_open,
)
from repo_builder.validate.records import ModelEntry, RuleContext, ValidateOptions
from repo_builder.validate.rules import RULES
from repo_builder.validate.scan import scan_repository

SUITE = find_suite(Path(__file__))
OPTIONS = (ValidateOptions(), ValidateOptions(strict=True, gpu_present=False, http_header_forward_pattern="X-.*"))
SECTIONED = tuple(r for r in RULES if r.sections or r.quiet)
# Every rule called for every model: no section gate, no quiet flag, no family gate (rules.GATES is keyed by
# the rule).
UNGATED = tuple(dataclasses.replace(r, sections=frozenset(), quiet=None, doc=r.doc + " ") for r in RULES)


def _bench_module() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "validate_speed.py"
    spec = importlib.util.spec_from_file_location("validate_speed_for_gates", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _closed_gates_hide_nothing(root: Path, options: ValidateOptions) -> tuple[int, int]:
    """Asserts each sectioned rule finds nothing where its gate is closed; (gates opened, gates closed)."""
    repository = scan_repository(root)
    ctx = RuleContext(repository, options, {})
    opened = closed = 0
    models: list[ModelEntry] = judging_order(repository)
    for model in models:
        sections = config_sections(model)
        flags = quiet_flags(model, ctx)
        for rule in SECTIONED:
            if rule.ensemble_only and not model.is_ensemble:
                continue
            if section_open(rule, sections) and not_quiet(rule, flags):
                opened += 1
                continue
            closed += 1
            found = list(rule.check(model, ctx))
            assert found == [], f"{rule.code} found {found[0].message!r} for {model.name} past its closed section gate"
        ctx.refused[model.name] = False
    return opened, closed


def _differential(root: Path, options_list: tuple[ValidateOptions, ...] = OPTIONS) -> tuple[int, int]:
    opened = closed = 0
    for options in options_list:
        gated = check_repository(scan_repository(root), options).diagnostics
        assert gated == check_repository(scan_repository(root), options, UNGATED).diagnostics
        o, c = _closed_gates_hide_nothing(root, options)
        opened, closed = opened + o, closed + c
    return opened, closed


def test_every_declared_section_is_a_top_level_model_config_field() -> None:
    fields = set(model_config_pb2.ModelConfig.DESCRIPTOR.fields_by_name)
    assert SECTIONED, "no rule declares sections: the gate is gone"
    for rule in SECTIONED:
        assert rule.sections <= fields, f"{rule.code}: {sorted(rule.sections - fields)} are not ModelConfig fields"
        assert not rule.repository_level


def test_every_declared_quiet_flag_is_a_flag() -> None:
    quiet = [r for r in RULES if r.quiet]
    assert quiet, "no rule declares a quiet flag: the plan no longer skips clean models' calls"
    for rule in quiet:
        assert rule.quiet in QuietFlags._fields, f"{rule.code}: {rule.quiet!r} is no QuietFlags field"
        assert not rule.repository_level


def test_ungated_rules_are_no_gated_rules() -> None:
    from repo_builder.validate.rules import GATES

    assert not any(r in GATES for r in UNGATED) and not any(r.sections or r.quiet for r in UNGATED)


CONFIGS = {
    # each sets a gated section wrongly, so the rule behind the gate must report it
    "dyn": 'backend: "python" max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 0, 9 ] priority_levels: 2 default_priority_level: 5 }',
    "seq": 'backend: "python" max_batch_size: 4 sequence_batching { control_input [{ name: "START" control [{ kind: CONTROL_SEQUENCE_START }] }] state [{ input_name: "s" output_name: "" }] }',
    "warm": 'backend: "python" model_warmup [{ name: "w" batch_size: 1 inputs { key: "NOPE" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } }]',
    "metrics": 'backend: "python" model_metrics { metric_control [{ }] }',
    "cache": 'backend: "python" model_transaction_policy { decoupled: true } response_cache { enable: true }',
    "batchio": 'backend: "python" max_batch_size: 4 batch_input [{ kind: BATCH_ELEMENT_COUNT target_name: [ "a", "b" ] data_type: TYPE_FP32 }]',
    "labels": 'backend: "python" output [{ name: "O" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "../labels.txt" }]',
    "cc": 'backend: "onnxruntime" cc_model_filenames { key: "nope" value: "missing.onnx" }',
    "sched": 'backend: "python" ensemble_scheduling { step [{ model_name: "dyn" model_version: -1 }] }',
    "env": 'backend: "python" parameters { key: "EXECUTION_ENV_PATH" value { string_value: "envs/pre.tar.gz" } }',
    "nvcf": 'backend: "python" parameters [{ key: "nvcf_assets" value { string_value: "1" } }, { key: "nvcf_asset_input" value { string_value: "ASSET" } }]',
    "plain": 'backend: "python" max_batch_size: 0',
    # each lowers one quiet flag, so the rule it stands for must run and report
    "nodims": 'backend: "python" input [{ name: "I" data_type: TYPE_FP32 }] output [{ name: "O" data_type: TYPE_FP32 dims: [ 1 ] }]',
    "shapes": 'backend: "python" input [{ name: "I" data_type: TYPE_FP32 dims: [ 0 ] }] output [{ name: "O" data_type: TYPE_FP32 dims: [ 1 ] }]',
    "feature": 'backend: "python" input [{ name: "I" data_type: TYPE_FP32 dims: [ 2 ] is_shape_tensor: true }] output [{ name: "O" data_type: TYPE_FP32 dims: [ 1 ] }]',
    "dupes": 'backend: "python" input [{ name: "I" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "I" data_type: TYPE_FP32 dims: [ 1 ] }] output [{ name: "O" data_type: TYPE_FP32 dims: [ 1 ] }]',
    "groups": 'backend: "python" instance_group [{ kind: KIND_CPU count: -1 profile: [ "0" ] }]',
    "negbatch": 'backend: "python" max_batch_size: -1',
    "twice": 'backend: "python" backend: "python"',
}
PY = b"class TritonPythonModel:\n    def execute(self, requests):\n        return requests\n"


def test_report_is_the_same_as_calling_every_rule_where_each_section_is_set(tmp_path: Path) -> None:
    root = tmp_path / "models"
    for name, config in CONFIGS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(f'name: "{name}" {config}\n')
        (root / name / "1" / ("model.onnx" if name == "cc" else "model.py")).write_bytes(PY)
    opened, closed = _differential(root)
    assert opened > 0 and closed > 0
    codes = {d.code for d in check_repository(scan_repository(root), OPTIONS[0]).diagnostics}
    # the gated rules still report where their section is written
    assert {"RB206", "RB207", "RB208", "RB209", "RB302", "RB303", "RB309", "RB501", "RB423"} <= codes
    # the quiet rules still report where their flag is down
    assert {"RB202", "RB203", "RB204", "RB205", "RB307", "RB308", "RB301", "RB201"} <= codes


def test_report_is_the_same_as_calling_every_rule_on_the_benchmark_repository(tmp_path: Path) -> None:
    root = tmp_path / "bench"
    root.mkdir()
    _bench_module().generate(root, 50)
    opened, closed = _differential(root)
    assert opened > 0 and closed > 0  # the benchmark's models leave most sections unset


ENSEMBLE_IO = 'input [{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }] output [{ name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }]'
MEMBER_IO = 'input [{ name: "I" data_type: TYPE_FP32 dims: [ 1 ] }] output [{ name: "O" data_type: TYPE_FP32 dims: [ 1 ] }]'
FLAG_CONFIGS = {
    # each lowers one of the platform, version, manifest, Python environment, devices or ensemble flags
    "undetermined": "max_batch_size: 0",  # no backend, no model file: RB401
    "unknown_platform": 'platform: "onnx"',  # RB402
    "mismatch": 'platform: "tensorrt_plan" backend: "onnxruntime"',  # RB403
    "custom": 'backend: "custom_thing"',  # RB404
    "no_version": 'backend: "python" version_policy { specific { versions: [ 7 ] } }',  # RB110
    "two_versions": 'backend: "python"',  # 1/ and 2/, the default policy loads 2/ only (RB111 looks)
    "gpus": 'backend: "python" instance_group [{ kind: KIND_GPU gpus: [ 0 ] }]',  # RB306 (refused with --no-gpu)
    "member": f'backend: "python" {MEMBER_IO}',
    "ens_missing": f'platform: "ensemble" {ENSEMBLE_IO} ensemble_scheduling {{ step [{{ model_name: "nowhere" model_version: -1 '
    'input_map { key: "I" value: "IN" } output_map { key: "O" value: "OUT" } }] }',  # RB504
    "ens_mapping": f'platform: "ensemble" {ENSEMBLE_IO} ensemble_scheduling {{ step [{{ model_name: "member" model_version: -1 '
    'input_map { key: "NOPE" value: "IN" } output_map { key: "O" value: "OUT" } }] }',  # RB509
}
# A Python step importing what no stock image has (RB421 with an image to judge it in).
STEP = PY + b"import not_in_any_image\n"


def test_report_is_the_same_as_calling_every_rule_where_each_new_flag_is_down(tmp_path: Path) -> None:
    root = tmp_path / "models"
    for name, config in FLAG_CONFIGS.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(f'name: "{name}" {config}\n')
        if name not in ("undetermined", "unknown_platform", "mismatch", "custom") and not name.startswith("ens_"):
            (root / name / "1" / "model.py").write_bytes(STEP)
    # a Python step defining no TritonPythonModel (RB407)
    (root / "bad_step" / "1").mkdir(parents=True)
    (root / "bad_step" / "config.pbtxt").write_text('name: "bad_step" backend: "python"\n')
    (root / "bad_step" / "1" / "model.py").write_bytes(b"x = 1\n")
    (root / "two_versions" / "2").mkdir()
    (root / "two_versions" / "2" / "model.py").write_bytes(STEP)
    # an ONNX model whose version 1, not loaded today, no longer fits the shared config (RB111)
    (root / "onnx_versions").mkdir()
    (root / "onnx_versions" / "config.pbtxt").write_text(
        onnx_config("onnx_versions", 0, [("x", "TYPE_FP32", [4])], [("y", "TYPE_FP32", [10])])
    )
    for version, classes in ((1, 5), (2, 10)):
        (root / "onnx_versions" / str(version)).mkdir()
        (root / "onnx_versions" / str(version) / "model.onnx").write_bytes(onnx_bytes([("x", 1, [4])], [("y", 1, [classes])]))
    # a build manifest recording a file that has changed since (RB002)
    recorded = {"versions": {"1": {"files": {"model.py": "0" * 64}}}}
    (root / "repo-builder.json").write_text(json.dumps({"models": {"two_versions": recorded}}))
    options = (*OPTIONS, ValidateOptions(deploy=resolve_target("24.12")))
    opened, closed = _differential(root, options)
    assert opened > 0 and closed > 0
    codes = {d.code for options in options for d in check_repository(scan_repository(root), options).diagnostics}
    assert {"RB002", "RB110", "RB111", "RB306", "RB401", "RB402", "RB403", "RB404", "RB407", "RB421", "RB504", "RB509"} <= codes


@pytest.mark.skipif(SUITE is None, reason="shared/conformance/triton-qa not found (set REPO_BUILDER_CONFORMANCE)")
def test_report_is_the_same_as_calling_every_rule_on_every_triton_conformance_case(tmp_path: Path) -> None:
    assert SUITE is not None
    runs = [run for case in load_cases(SUITE) for run in case_runs(case)]
    assert runs
    opened = closed = 0
    for i, run in enumerate(runs):
        root = materialize_case(run, tmp_path / f"case{i}")
        o, c = _differential(root)
        opened, closed = opened + o, closed + c
        shutil.rmtree(root)
    assert opened > 0 and closed > 0
