"""RB7xx on hand-written plan.json sidecars: each rule with a repository that breaks it and one that does not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from repo_builder.compile_recipe import CompileSettings
from repo_builder.errors import UserError
from repo_builder.validate.engine import check_repository
from repo_builder.validate.records import Diagnostic, Severity, ValidateOptions
from repo_builder.validate.rules import RULES
from repo_builder.validate.rules import tensorrt as trt_rules
from repo_builder.validate.scan import scan_repository

TEXT_CONFIG = """\
name: "bert"
platform: "tensorrt_plan"
max_batch_size: {max_batch}
input [
  {{ name: "input_ids" data_type: {ids_type} dims: [ {seq} ] }},
  {{ name: "attention_mask" data_type: TYPE_INT64 dims: [ -1 ] }}
]
output [ {{ name: "logits" data_type: TYPE_FP32 dims: [ 2 ] }} ]
instance_group [ {{ kind: {kind} count: 1 {profile} }} ]
{extra}
"""


def _profile(max_batch: int, max_seq: int) -> dict:
    r = {"min": [1, 1], "opt": [max_batch, min(128, max_seq)], "max": [max_batch, max_seq]}
    return {"input_ids": r, "attention_mask": r}


def _plan_entry(
    version: str = "10.3.0.26", cc: str = "8.6", profiles: list | None = None, ids_dtype: str = "INT64"
) -> dict:
    return {
        "tensorrt_version": version,
        "gpu_name": "NVIDIA A10",
        "compute_capability": cc,
        "precision": "fp16",
        "builder": "api",
        "profiles": profiles if profiles is not None else [_profile(8, 128)],
        "inputs": [
            {"name": "input_ids", "dtype": ids_dtype, "shape": [-1, -1]},
            {"name": "attention_mask", "dtype": "INT64", "shape": [-1, -1]},
        ],
        "outputs": [{"name": "logits", "dtype": "FLOAT", "shape": [-1, 2]}],
    }


def make_repo(
    tmp_path: Path,
    *,
    max_batch: int = 8,
    ids_type: str = "TYPE_INT64",
    seq: int = -1,
    kind: str = "KIND_GPU",
    profile: str = "",
    extra: str = "",
    plans: dict[str, dict] | None = None,
    files: tuple[str, ...] | None = None,
    sidecar: bool = True,
) -> Path:
    repo = tmp_path / "repo"
    model = repo / "bert"
    version = model / "1"
    version.mkdir(parents=True)
    (model / "config.pbtxt").write_text(
        TEXT_CONFIG.format(
            max_batch=max_batch, ids_type=ids_type, seq=seq, kind=kind, profile=profile, extra=extra
        )
    )
    plans = plans if plans is not None else {"model.plan": _plan_entry()}
    for name in files if files is not None else tuple(plans):
        (version / name).write_bytes(b"serialized engine bytes")
    if sidecar:
        (version / "plan.json").write_text(json.dumps({"format": 1, "plans": plans}))
    return repo


def run(repo: Path, **options) -> list[Diagnostic]:
    return list(
        check_repository(scan_repository(repo), ValidateOptions(**options), trt_rules.RULES).diagnostics
    )


def codes(diagnostics: list[Diagnostic], severity: Severity | None = Severity.ERROR) -> list[str]:
    return sorted(d.code for d in diagnostics if severity is None or d.severity == severity)


def test_tensorrt_rules_find_nothing_when_config_matches_plan(tmp_path: Path):
    assert run(make_repo(tmp_path), triton_release="24.08") == []


def test_rb702_reports_triton_message_when_max_batch_exceeds_profile(tmp_path: Path):
    found = run(make_repo(tmp_path, max_batch=16))
    assert codes(found) == ["RB702"]
    assert (
        "configuration specified max-batch 16 but TensorRT engine only supports max-batch 8"
        in found[0].message
    )


def test_rb702_passes_when_instance_group_uses_a_bigger_profile(tmp_path: Path):
    plans = {"model.plan": _plan_entry(profiles=[_profile(8, 128), _profile(16, 128)])}
    assert run(make_repo(tmp_path, max_batch=16, profile='profile: [ "1" ]', plans=plans)) == []


def test_rb703_reports_dim_outside_profile_when_config_fixes_longer_sequence(tmp_path: Path):
    found = run(make_repo(tmp_path, seq=256))
    assert codes(found) == ["RB703"]
    assert (
        "input 'input_ids' dim 256 on axis 1 is outside optimization profile 0's range 1..128"
        in found[0].message
    )


def test_rb703_passes_when_fixed_dim_inside_profile(tmp_path: Path):
    assert run(make_repo(tmp_path, seq=64)) == []


def test_rb703_reports_rank_when_config_lists_batch_axis(tmp_path: Path):
    repo = make_repo(tmp_path)
    config = repo / "bert" / "config.pbtxt"
    config.write_text(config.read_text().replace("dims: [ 2 ]", "dims: [ -1, 2 ]"))
    found = run(repo)
    assert codes(found) == ["RB703"]
    assert "output 'logits' has 2 dims" in found[0].message


def test_rb704_reports_dtype_mismatch_when_config_says_int32_for_int64_engine(tmp_path: Path):
    found = run(make_repo(tmp_path, ids_type="TYPE_INT32"))
    assert codes(found) == ["RB704"]
    assert (
        "unexpected datatype TYPE_INT32 for input 'input_ids', the TensorRT engine has TYPE_INT64"
        in found[0].message
    )


def test_rb704_passes_when_engine_was_built_with_int32_ids(tmp_path: Path):
    plans = {"model.plan": _plan_entry(ids_dtype="INT32")}
    assert run(make_repo(tmp_path, ids_type="TYPE_INT32", plans=plans)) == []


def test_rb705_reports_unknown_and_missing_names_when_config_renames_input(tmp_path: Path):
    repo = make_repo(tmp_path)
    config = repo / "bert" / "config.pbtxt"
    config.write_text(config.read_text().replace('name: "input_ids"', 'name: "ids"'))
    found = run(repo)
    assert codes(found) == ["RB705", "RB705"]
    messages = " | ".join(d.message for d in found)
    assert "unexpected inference input 'ids', allowed inputs are: input_ids, attention_mask" in messages
    assert "expected configuration for input 'input_ids' for bert" in messages


def test_rb706_reports_missing_per_capability_file_when_version_lacks_it(tmp_path: Path):
    plans = {"model_sm86.plan": _plan_entry(cc="8.6"), "model_sm90.plan": _plan_entry(cc="9.0")}
    extra = 'cc_model_filenames { key: "8.6" value: "model_sm86.plan" }\ncc_model_filenames { key: "9.0" value: "model_sm90.plan" }'
    found = run(make_repo(tmp_path, extra=extra, plans=plans, files=("model_sm86.plan",)))
    assert codes(found) == ["RB706"]
    assert "cc_model_filenames maps '9.0' to 'model_sm90.plan', which is missing" in found[0].message
    assert found[0].version == 1


def test_rb706_passes_when_every_per_capability_file_exists(tmp_path: Path):
    plans = {"model_sm86.plan": _plan_entry(cc="8.6"), "model_sm90.plan": _plan_entry(cc="9.0")}
    extra = 'cc_model_filenames { key: "8.6" value: "model_sm86.plan" }\ncc_model_filenames { key: "9.0" value: "model_sm90.plan" }'
    found = run(make_repo(tmp_path, extra=extra, plans=plans, files=("model_sm86.plan", "model_sm90.plan")))
    assert found == []


def test_rb706_reports_key_and_capability_mismatch_when_keys_wrong(tmp_path: Path):
    plans = {"model_sm86.plan": _plan_entry(cc="8.6")}
    extra = 'cc_model_filenames { key: "sm86" value: "model_sm86.plan" }\ncc_model_filenames { key: "9.0" value: "model_sm86.plan" }'
    found = run(make_repo(tmp_path, extra=extra, plans=plans))
    messages = [d.message for d in found if d.code == "RB706"]
    assert any("key 'sm86' is not a compute capability" in m for m in messages)
    assert any(
        "built for compute capability 8.6 but cc_model_filenames lists it under '9.0'" in m for m in messages
    )


def test_rb707_reports_version_mismatch_when_plan_newer_than_triton_release(tmp_path: Path):
    plans = {"model.plan": _plan_entry(version="10.5.0.18")}
    found = run(make_repo(tmp_path, plans=plans), triton_release="24.08")
    assert codes(found) == ["RB707"]
    assert "built with TensorRT 10.5.0.18 but Triton 24.08 ships TensorRT 10.3.0" in found[0].message
    assert "24.10" in (found[0].hint or "")


def test_rb707_refuses_when_triton_release_unknown(tmp_path: Path):
    found = run(make_repo(tmp_path), triton_release="21.01")
    assert codes(found) == ["RB707"]
    assert "not in the TensorRT version table" in found[0].message and "--tensorrt-version" in found[0].message


def test_rb708_reports_cpu_instances_when_kind_cpu(tmp_path: Path):
    found = run(make_repo(tmp_path, kind="KIND_CPU"))
    assert codes(found) == ["RB708"]


def test_rb709_is_info_not_warning_when_plan_has_no_sidecar(tmp_path: Path):
    found = run(make_repo(tmp_path, sidecar=False))
    assert codes(found, Severity.WARNING) == [] and codes(found, Severity.INFO) == ["RB709"]
    assert "no plan.json entry (its header names no TensorRT version)" in found[0].message


def test_rb709_reports_error_when_sidecar_broken(tmp_path: Path):
    repo = make_repo(tmp_path)
    (repo / "bert" / "1" / "plan.json").write_text("{broken")
    found = run(repo)
    assert codes(found) == ["RB709"]
    assert "not a valid plan.json" in found[0].message


def test_rb710_reports_triton_message_when_profile_index_out_of_range(tmp_path: Path):
    found = run(make_repo(tmp_path, profile='profile: [ "1" ]'))
    assert "RB710" in codes(found)
    assert any(
        "configuration specified invalid profile 1 . Number of profiles supported by TensorRT engine: 1"
        in d.message
        for d in found
    )


def test_rb701_reports_pending_plan_as_error_unless_allowed(tmp_path: Path):
    from repo_builder.compile_recipe import RECIPE_FILE, Recipe
    from repo_builder.spec import Signature, TensorSpec

    repo = make_repo(tmp_path, plans={}, files=(), sidecar=False)
    signature = Signature(
        inputs=(TensorSpec("input_ids", "int64", ("batch", "sequence")),),
        outputs=(TensorSpec("logits", "float32", ("batch", 2)),),
    )
    recipe = Recipe("model.source.onnx", signature, CompileSettings(max_seq_len=128), ())
    (repo / "bert" / "1" / RECIPE_FILE).write_text(json.dumps(recipe.to_json()))
    assert codes(run(repo)) == ["RB701"]
    relaxed = run(repo, allow_pending=True)
    assert codes(relaxed) == [] and codes(relaxed, Severity.WARNING) == ["RB701"]
    (repo / "bert" / "1" / "model.plan").write_bytes(b"built")
    assert "RB701" not in codes(run(repo), None)


def test_tensorrt_rules_ignore_models_of_other_platforms_when_onnxruntime(tmp_path: Path):
    repo = make_repo(tmp_path, kind="KIND_CPU", max_batch=64)
    config = repo / "bert" / "config.pbtxt"
    config.write_text(config.read_text().replace("tensorrt_plan", "onnxruntime_onnx"))
    assert run(repo) == []


def test_tensorrt_rules_are_registered_with_unique_rb7_codes_and_docs():
    registered = {r.code for r in RULES}
    for r in trt_rules.RULES:
        assert r.code.startswith("RB7") and r.code in registered
        assert "Fails:" in r.doc and "Passes:" in r.doc
    assert len({r.code for r in trt_rules.RULES}) == len(trt_rules.RULES)


@pytest.mark.gpu
def test_tensorrt_rules_read_engine_itself_when_gpu_and_tensorrt_present(tmp_path: Path):
    from repo_builder.gpu import gpu_present
    from repo_builder.plan_format import tensorrt_available

    if not (gpu_present() and tensorrt_available()):
        pytest.skip(reason="needs an NVIDIA GPU and TensorRT")
    # A fake plan on a GPU machine must be reported as undeserializable, not trusted via plan.json.
    found = run(make_repo(tmp_path), gpu_present=True)
    assert any(d.code == "RB709" and "cannot deserialize" in d.message for d in found)


# --- issue 13 defects 2-4 and issue 12 (RB709) -------------------------------------------------------

TWO_OUTPUTS = {"outputs": [{"name": "logits", "dtype": "FLOAT", "shape": [-1, 2]}, {"name": "hidden", "dtype": "FLOAT", "shape": [-1, 4]}]}


def test_rb705_reports_backend_message_when_config_omits_one_engine_output(tmp_path: Path):
    found = run(make_repo(tmp_path, plans={"model.plan": {**_plan_entry(), **TWO_OUTPUTS}}))
    assert codes(found) == ["RB705"]
    assert "expected configuration for output 'hidden' for bert" in found[0].message


def test_rb705_passes_when_config_lists_no_outputs_and_backend_fills_them(tmp_path: Path):
    repo = make_repo(tmp_path, plans={"model.plan": {**_plan_entry(), **TWO_OUTPUTS}})
    config = repo / "bert" / "config.pbtxt"
    config.write_text(config.read_text().replace('output [ { name: "logits" data_type: TYPE_FP32 dims: [ 2 ] } ]', ""))
    assert run(repo) == []
    assert codes(run(repo, strict=True)) == ["RB705", "RB705"]  # no auto-complete: every output must be listed


def test_rb705_counts_batch_output_as_configured_when_engine_output_is_a_batch_output(tmp_path: Path):
    extra = 'batch_output [ { target_name: "hidden" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "input_ids" } ]'
    assert run(make_repo(tmp_path, plans={"model.plan": {**_plan_entry(), **TWO_OUTPUTS}}, extra=extra)) == []


def _plan_header(version: tuple[int, int, int, int]) -> bytes:
    """The first bytes of a TensorRT 10+ plan as trtexec --getPlanVersionOnly reads them."""
    import struct

    return struct.pack("<II", 0x74727466, 0) + bytes(16) + bytes(version) + b"rest of the engine"


def test_rb709_names_header_version_when_plan_has_no_sidecar(tmp_path: Path):
    repo = make_repo(tmp_path, sidecar=False)
    (repo / "bert" / "1" / "model.plan").write_bytes(_plan_header((10, 3, 0, 26)))
    found = run(repo)
    assert [(d.code, d.severity) for d in found] == [("RB709", Severity.INFO)]
    assert "its header says TensorRT 10.3.0.26" in found[0].message


def test_rb707_uses_header_version_when_plan_has_no_sidecar(tmp_path: Path):
    repo = make_repo(tmp_path, sidecar=False)
    (repo / "bert" / "1" / "model.plan").write_bytes(_plan_header((10, 3, 0, 26)))
    assert codes(run(repo, triton_release="24.08")) == []
    found = [d for d in run(repo, triton_release="24.10") if d.code == "RB707"]
    assert len(found) == 1 and "built with TensorRT 10.3.0.26 but Triton 24.10 ships TensorRT 10.5.0" in found[0].message
    assert "plan's header" in found[0].message or "header" in found[0].message


# TensorRT and a GPU cannot run here: the engine reader and the GPU probe are replaced by what a GPU
# machine's TensorRT would return, to test which plan is deserialized and what the rules do with it.


@pytest.fixture
def gpu_machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    from repo_builder.gpu import GpuInfo
    from repo_builder.plan_format import EngineDescription, EngineTensor
    from repo_builder.spec import Profile
    from repo_builder.validate.analysis import tensorrt_plans

    read: list[str] = []

    def read_engine(path: Path) -> EngineDescription:
        read.append(path.name)
        if path.name == "model_sm80.plan":
            raise UserError(f"{path}: TensorRT 10.5.0 cannot deserialize this plan (built for another GPU)")
        r = {"min": (1, 1), "opt": (8, 128), "max": (8, 128)}
        profile = Profile().add("input_ids", r["min"], r["opt"], r["max"]).add("attention_mask", r["min"], r["opt"], r["max"])
        return EngineDescription(
            "10.5.0",
            (profile,),
            (EngineTensor("input_ids", "INT64", (-1, -1)), EngineTensor("attention_mask", "INT64", (-1, -1))),
            (EngineTensor("logits", "FLOAT", (-1, 2)),),
        )

    tensorrt_plans._engine.cache_clear()
    tensorrt_plans.engine_capabilities.cache_clear()
    monkeypatch.setattr(tensorrt_plans, "read_engine", read_engine)
    monkeypatch.setattr(tensorrt_plans, "tensorrt_available", lambda: True)
    monkeypatch.setattr(tensorrt_plans, "detect_gpus", lambda: (GpuInfo(0, "NVIDIA H100", "9.0"),))
    yield read
    tensorrt_plans.engine_capabilities.cache_clear()


def test_rb707_checks_engine_described_plan_when_gpu_machine(tmp_path: Path, gpu_machine: list[str]):
    found = run(make_repo(tmp_path), triton_release="24.08", gpu_present=True)
    assert codes(found) == ["RB707"] and gpu_machine == ["model.plan"]
    assert "built with TensorRT 10.5.0 but Triton 24.08 ships TensorRT 10.3.0" in found[0].message


def test_rb709_deserializes_only_this_gpus_plan_when_cc_model_filenames(tmp_path: Path, gpu_machine: list[str]):
    plans = {"model_sm80.plan": _plan_entry(cc="8.0", version="10.5.0"), "model_sm90.plan": _plan_entry(cc="9.0", version="10.5.0")}
    extra = 'cc_model_filenames { key: "8.0" value: "model_sm80.plan" }\ncc_model_filenames { key: "9.0" value: "model_sm90.plan" }'
    repo = make_repo(tmp_path, extra=extra, plans=plans)
    (repo / "bert" / "1" / "model.plan").write_bytes(b"fallback plan for other GPUs")
    (repo / "bert" / "1" / "plan.json").write_text(json.dumps({"format": 1, "plans": {**plans, "model.plan": _plan_entry(version="10.5.0")}}))
    found = run(repo, gpu_present=True)
    assert gpu_machine == ["model_sm90.plan"]  # Triton on a 9.0 GPU loads only this one
    assert codes(found) == []
