from __future__ import annotations

import json
from pathlib import Path

import pytest

from repo_builder.compile import EngineTensor, PlanInfo, Profile, read_sidecar, write_sidecar
from repo_builder.errors import ToolError, UserError
from repo_builder.gpu import gpu_present, parse_nvidia_smi, physical_index, require_gpu
from repo_builder.plan_format import capability_from_sm
from repo_builder.tensorrt_releases import normalize_release, same_tensorrt, tensorrt_for_release


def _info(name: str, cc: str) -> PlanInfo:
    return PlanInfo(
        filename=name,
        tensorrt_version="10.3.0.26",
        compute_capability=cc,
        profiles=(Profile().add("input_ids", (1, 1), (8, 128), (8, 512)),),
        inputs=(EngineTensor("input_ids", "INT64", (-1, -1)),),
        outputs=(EngineTensor("logits", "FLOAT", (-1, 2)),),
        gpu_name="NVIDIA A10",
        precision="fp16",
        builder="api",
    )


def test_read_sidecar_returns_what_was_written_when_round_trip(tmp_path: Path):
    write_sidecar(tmp_path, _info("model.plan", "8.6"))
    plans = read_sidecar(tmp_path / "plan.json")
    assert plans == {"model.plan": _info("model.plan", "8.6")}
    assert plans["model.plan"].profiles[0]["input_ids"].max == (8, 512)
    assert plans["model.plan"].inputs[0].triton_type == "TYPE_INT64"


def test_write_sidecar_keeps_other_plans_when_second_capability_added(tmp_path: Path):
    write_sidecar(tmp_path, _info("model_sm86.plan", "8.6"))
    write_sidecar(tmp_path, _info("model_sm90.plan", "9.0"))
    plans = read_sidecar(tmp_path)
    assert sorted(plans) == ["model_sm86.plan", "model_sm90.plan"]
    assert plans["model_sm90.plan"].compute_capability == "9.0"


def test_read_sidecar_reads_hand_written_file_when_minimal_fields(tmp_path: Path):
    (tmp_path / "plan.json").write_text(json.dumps({
        "format": 1,
        "plans": {"model.plan": {"tensorrt_version": "10.3.0", "compute_capability": "8.0",
                                 "inputs": [{"name": "x", "dtype": "DataType.HALF", "shape": [-1, 3]}]}},
    }))
    info = read_sidecar(tmp_path)["model.plan"]
    assert info.inputs[0].dtype == "HALF" and info.inputs[0].triton_type == "TYPE_FP16"
    assert info.profiles == ()


@pytest.mark.parametrize("text", ["{not json", '{"format": 2, "plans": {}}', '{"format": 1, "plans": {"m.plan": {}}}'])
def test_read_sidecar_raises_one_line_when_file_broken(tmp_path: Path, text: str):
    (tmp_path / "plan.json").write_text(text)
    with pytest.raises(UserError, match=r"not a valid plan\.json") as info:
        read_sidecar(tmp_path)
    assert "\n" not in str(info.value)


def test_parse_nvidia_smi_reads_name_and_capability_when_csv():
    gpus = parse_nvidia_smi("0, NVIDIA A100-SXM4-80GB, 8.0\n1, NVIDIA H100 80GB HBM3, 9.0\nNo devices were found\n")
    assert [(g.index, g.name, g.compute_capability, g.sm) for g in gpus] == [
        (0, "NVIDIA A100-SXM4-80GB", "8.0", "sm80"),
        (1, "NVIDIA H100 80GB HBM3", "9.0", "sm90"),
    ]


@pytest.mark.parametrize("name, cc", [("model_sm90.plan", "9.0"), ("model_sm86.plan", "8.6"), ("sm_120", "12.0"), ("model.plan", None)])
def test_capability_from_sm_reads_capability_when_name_has_sm(name: str, cc: str | None):
    assert capability_from_sm(name) == cc


@pytest.mark.skipif(gpu_present(), reason="this machine has a GPU")
def test_require_gpu_raises_one_line_naming_what_is_missing_when_no_gpu():
    with pytest.raises(ToolError) as info:
        require_gpu()
    message = str(info.value)
    assert "no NVIDIA GPU found" in message and "\n" not in message
    assert "nvidia-smi" in message or "libcuda" in message


def test_tensorrt_for_release_knows_24_08_when_table_lookup():
    assert tensorrt_for_release("24.08") == "10.3.0"
    assert tensorrt_for_release("r24.8") == "10.3.0"
    assert tensorrt_for_release("24.05-py3") == "10.0.1"
    assert tensorrt_for_release("21.01") is None


def test_normalize_release_raises_when_not_a_release():
    with pytest.raises(UserError, match=r"not a release like 24\.08"):
        normalize_release("latest")


def test_same_tensorrt_ignores_build_number_but_not_patch():
    assert same_tensorrt("10.3.0.26", "10.3.0")
    assert not same_tensorrt("10.3.1", "10.3.0")
    assert not same_tensorrt("10.5.0.18", "10.3.0")
    assert same_tensorrt("10.13.3.9", "10.13")


def test_physical_index_follows_cuda_visible_devices_when_it_lists_indices():
    assert physical_index(0, "2,3") == 2
    assert physical_index(1, "2,3") == 3
    assert physical_index(0, "GPU-5f0c1d2e") == 0
    assert physical_index(1, "") == 1
