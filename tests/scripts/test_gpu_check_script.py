"""scripts/gpu-check's parts that run without a GPU: arguments, the refusal on a machine without one, the
JSON record, the test model and its configs. (The GPU stages themselves run only on a GPU machine.)"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from repo_builder.compile import parse_profile_options
from repo_builder.compile.precision import choose_precision, read_onnx_facts
from repo_builder.errors import UserError

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
_spec = importlib.util.spec_from_file_location("gpu_day", SCRIPTS / "gpu_day.py")
assert _spec and _spec.loader
gpu_day = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_day)


@pytest.mark.parametrize("release", ["24.8.1", "latest", "24.13", ""])
def test_gpu_check_exits_2_when_release_malformed(release: str, capsys):
    with pytest.raises(SystemExit) as info:
        gpu_day.parse_args(["--triton-release", release])
    assert info.value.code == 2
    assert "is not a release like 24.08" in capsys.readouterr().err


def test_gpu_check_exits_3_in_one_line_and_writes_no_record_when_machine_has_no_gpu(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "python3"):  # a PATH with the script's own needs and no nvidia-smi
        (bin_dir / tool).symlink_to(subprocess.run(["which", tool], capture_output=True, text=True, check=True).stdout.strip())
    out = tmp_path / "record.json"
    done = subprocess.run(
        [str(SCRIPTS / "gpu-check"), "--triton-release", "24.08", "--out", str(out)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PATH": str(bin_dir)}, check=False,
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().splitlines() == [
        "gpu-check: no NVIDIA GPU here (nvidia-smi is not on PATH); run this on the GPU machine you serve on"
    ]
    assert not out.exists()


def _good_record() -> dict:
    record = gpu_day.new_record("24.08", {"gpus": ["0, NVIDIA A10, 8.6, 550.54"]})
    gpu_day.merge_stage(record, "build", {
        "environment": {"tensorrt": "10.3.0.26"},
        "builds": [{"model": "check_api_1p_fp32", "ok": True, "profiles": 1, "precision": "fp32"}],
        "validate": {"exit_code": 0, "report": {}},
    })
    gpu_day.merge_stage(record, "serve", {
        "loads": [{"model": "check_api_1p_fp32", "loaded": True}],
        "comparisons": [gpu_day.compare("check_api_1p_fp32", 1, [1.0, 2.0], [[1.0, 2.0004]], "fp32")],
    })
    return record


def test_finish_record_is_ok_when_every_build_load_and_answer_passed(tmp_path: Path):
    path = gpu_day.write_record(gpu_day.finish_record(_good_record()), tmp_path / "out" / "gpu-check.json")
    data = json.loads(path.read_text())
    assert data["ok"] is True and data["failures"] == []
    assert data["format"] == 1 and data["triton_release"] == "24.08"
    assert data["images"] == {"build": "nvcr.io/nvidia/tensorrt:24.08-py3", "serve": "nvcr.io/nvidia/tritonserver:24.08-py3"}
    assert data["environment"]["tensorrt"] == "10.3.0.26" and data["comparisons"][0]["max_abs_diff"] == 0.0004
    assert [p.name for p in path.parent.iterdir()] == ["gpu-check.json"]  # no temp file left


def test_finish_record_lists_each_failure_when_a_load_and_an_answer_fail():
    record = _good_record()
    record["loads"].append({"model": "check_trtexec_2p_fp16", "loaded": False, "error": "failed to load"})
    record["comparisons"].append(gpu_day.compare("check_api_1p_fp32", 4, [0.0, 0.0], [[1.0, 1.0]], "fp32"))
    data = gpu_day.finish_record(record)
    assert data["ok"] is False
    assert data["failures"] == ["load check_trtexec_2p_fp16: failed to load", "answer check_api_1p_fp32 batch 4: max abs diff 1.0"]


def test_finish_record_fails_when_nothing_was_built():
    assert gpu_day.finish_record(gpu_day.new_record("24.08", {}))["failures"] == ["nothing was built"]


def test_compare_reports_count_mismatch_when_server_answers_too_few_values():
    entry = gpu_day.compare("m", 2, [1.0], [[1.0, 2.0]], "fp16")
    assert entry["ok"] is False and entry["error"] == "expected 2 values, got 1"


def test_gpu_check_configs_parse_and_name_every_profile_when_rendered():
    for profiles in gpu_day.PROFILE_SETS:
        config = text_format.Parse(gpu_day.config_text("m", profiles), model_config_pb2.ModelConfig())
        assert list(config.instance_group[0].profile) == [str(i) for i in range(profiles)]
        assert config.max_batch_size == max(hi for *_, hi in gpu_day.PROFILE_SETS[profiles])
        parsed = parse_profile_options([o.removeprefix("--profile=") for o in gpu_day.profile_options(profiles)])
        assert len(parsed) == profiles


def test_gpu_check_models_fit_each_tensorrt_major_when_fp16(tmp_path: Path):
    """TensorRT 11 refuses fp16 for an fp32 ONNX (issue 13.8): the check builds fp16 there from the
    float16 model, and that model answers like the fp32 one within the fp16 tolerance."""
    import numpy as np
    import onnxruntime as ort

    models = gpu_day.make_models(tmp_path)
    with pytest.raises(UserError):
        choose_precision("fp16", 11, read_onnx_facts(models["fp32"]))
    assert choose_precision("fp16", 11, read_onnx_facts(models["fp16"])).strongly_typed
    x = np.asarray(gpu_day.sample_input(4, 4), dtype=np.float32).reshape(4, 3, 8, 8)
    answers = [ort.InferenceSession(str(models[p]), providers=["CPUExecutionProvider"]).run(None, {"input": x})[0] for p in ("fp32", "fp16")]
    assert float(np.abs(answers[0] - answers[1]).max()) <= gpu_day.TOLERANCE["fp16"]


def test_stage_command_runs_each_stage_in_the_release_container_when_docker():
    build = gpu_day.stage_command("build", "24.08", Path("/w"), no_docker=False)
    serve = gpu_day.stage_command("serve", "24.08", Path("/w"), no_docker=False)
    assert build[:4] == ["docker", "run", "--rm", "--gpus"] and "nvcr.io/nvidia/tensorrt:24.08-py3" in build
    assert "nvcr.io/nvidia/tritonserver:24.08-py3" in serve and "pip install" not in serve[-1]
    assert build[-1].endswith("--triton-release 24.08 --stage build --work /work")
    local = gpu_day.stage_command("serve", "24.08", Path("/w"), no_docker=True)
    assert local[0] == sys.executable and local[-2:] == ["--work", "/w"]


def test_gpu_check_dali_stages_run_in_release_containers_only_when_asked() -> None:
    build = gpu_day.stage_command("dali-build", "24.08", Path("/w"), no_docker=False)
    serve = gpu_day.stage_command("dali-serve", "24.08", Path("/w"), no_docker=False)
    assert "nvcr.io/nvidia/tensorrt:24.08-py3" in build and "[export,serve,dali]" in build[-1]
    assert "nvcr.io/nvidia/tritonserver:24.08-py3" in serve and "--stage dali-serve" in serve[-1]
    assert gpu_day.parse_args(["--triton-release", "24.08"]).dali is False


def test_finish_record_fails_when_dali_step_does_not_load_or_answers_wrong() -> None:
    record = _good_record()
    gpu_day.merge_stage(record, "dali-build", {"build": {"exit_code": 0}})
    gpu_day.merge_stage(record, "dali-serve", {"models": {"rn50dali_preprocess": False, "rn50dali": True},
                                               "answer": {"ok": False, "mean_abs_diff": 0.3}})
    failures = gpu_day.finish_record(record)["failures"]
    assert failures == ["dali load rn50dali_preprocess: not ready", "dali answer: mean 0.3"]
    passing = _good_record()
    gpu_day.merge_stage(passing, "dali-serve", {"models": {"rn50dali": True}, "answer": {"ok": True}, "throughput": {}})
    assert gpu_day.finish_record(passing)["ok"] is True


def test_gpu_day_server_stops_the_server_and_keeps_its_log_tail_when_the_stage_fails(tmp_path: Path,
                                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # A stand-in for the container's tritonserver: it logs its arguments and runs until stopped.
    fake = tmp_path / "bin" / "tritonserver"
    fake.parent.mkdir()
    pid_file = tmp_path / "pid"
    fake.write_text(f'#!/bin/sh\necho "started $*"\necho $$ > {pid_file}\nexec sleep 300\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    kept: dict[str, str] = {}
    with pytest.raises(RuntimeError), gpu_day.tritonserver(tmp_path / "repo", tmp_path / "server.log", "--model-control-mode=none") as after:
        kept = after
        for _ in range(100):
            if pid_file.exists() and (tmp_path / "server.log").read_text():
                break
            time.sleep(0.05)
        raise RuntimeError("the stage failed")
    assert f"--model-repository={tmp_path / 'repo'} --exit-on-error=false --model-control-mode=none --http-port=8000" in kept["server_log_tail"]
    pid = int(pid_file.read_text())
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
