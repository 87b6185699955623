#!/usr/bin/env python3
"""The GPU-day check: build real TensorRT plans, load them in the real tritonserver, compare with onnxruntime.

    scripts/gpu-check --triton-release 24.08 [--out gpu-check.json] [--keep WORK] [--no-docker]

On a machine with an NVIDIA GPU, Docker and the NVIDIA container toolkit, for the given Triton release it
1. builds, in NVIDIA's TensorRT container of the same release (``nvcr.io/nvidia/tensorrt:YY.MM-py3``), a
   tiny image model through ``repo-builder compile`` with both builders (TensorRT's Python API and
   ``trtexec``), with one and with two optimization profiles, in fp32 and in fp16 (strongly typed on
   TensorRT 10 and 11: on 10 ``compile`` converts the fp32 ONNX, on 11 the ONNX computes in float16);
2. validates the repository there (``repo-builder validate --gpu``: RB7xx with the engines themselves) and
   runs the repository's own ``gpu``-marked tests (real builds through ``compile`` and ``compile-pending``);
3. loads every plan in the real ``tritonserver`` of that release (``nvcr.io/nvidia/tritonserver:YY.MM-py3``)
   and sends each one request per profile's batch range;
4. compares every answer with onnxruntime's on the same inputs;
5. writes a JSON record of everything it saw (``--out``, default gpu-check.json) and exits 0 only when
   every plan built, loaded and answered within tolerance.

Exit codes: 0 all good, 1 something failed (the record says what), 2 usage, 3 this machine cannot run the
check (no GPU, no Docker). ``--no-docker`` runs each stage on this machine instead (TensorRT, trtexec and
tritonserver installed natively). Nothing here claims a GPU result unless it ran on one.

``--dali`` adds two stages (scripts/gpu_day_dali.py; written, not yet run on a GPU): ``build resnet50
--preprocess dali`` in the TensorRT container, then the Triton container (which ships the DALI backend) serves
it; the record's ``dali`` key holds the DALI step's answer against torchvision and images/s for the DALI step
and the ensemble at 500x375 and 1920x1080.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_day_dali import dali_build_stage, dali_failures, dali_serve_stage
from gpu_day_server import tritonserver

RECORD_FORMAT = 1
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT = 0, 1, 2, 3
BUILDERS = ("api", "trtexec")
PROFILE_SETS = {1: ((1, 4, 4),), 2: ((1, 4, 4), (5, 16, 16))}  # batch (min, opt, max) per profile
PRECISIONS = ("fp32", "fp16")
TOLERANCE = {"fp32": 1e-3, "fp16": 3e-2}  # max abs difference on logits of magnitude ~10
SOURCE = Path(__file__).resolve().parents[1]
GPU_TESTS = [str(SOURCE / "tests" / "compile"), str(SOURCE / "tests" / "validate" / "test_tensorrt_rules.py")]


class CheckError(Exception):
    """The machine cannot run the check: exit 3 with this one line."""


# --- arguments ------------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--triton-release", required=True, metavar="YY.MM", help="e.g. 24.08: the NGC release to build and serve with")
    parser.add_argument("--out", type=Path, default=Path("gpu-check.json"), help="where to write the JSON record")
    parser.add_argument("--keep", type=Path, default=None, metavar="WORK", help="build in WORK and keep it (default: a temp folder)")
    parser.add_argument("--no-docker", action="store_true", help="run every stage on this machine (TensorRT and tritonserver installed)")
    parser.add_argument("--dali", action="store_true", help="also build and serve resnet50 --preprocess dali and record its images/s")
    parser.add_argument("--stage", choices=("host", "build", "serve", "dali-build", "dali-serve"), default="host", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    m = re.fullmatch(r"(\d{2})\.(\d{2})", args.triton_release)
    if not m or not 1 <= int(m.group(2)) <= 12:
        parser.error(f"--triton-release '{args.triton_release}' is not a release like 24.08")
    return args


def images(release: str) -> dict[str, str]:
    return {"build": f"nvcr.io/nvidia/tensorrt:{release}-py3", "serve": f"nvcr.io/nvidia/tritonserver:{release}-py3"}


# --- the record -----------------------------------------------------------------------------------------


def new_record(release: str, host: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": RECORD_FORMAT,
        "tool": "repo-builder scripts/gpu-check",
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "triton_release": release,
        "images": images(release),
        "host": host,
        "environment": {},
        "builds": [],
        "validate": None,
        "gpu_tests": None,
        "loads": [],
        "comparisons": [],
        "ok": False,
        "failures": [],
    }


def finish_record(record: dict[str, Any]) -> dict[str, Any]:
    """Set ``ok`` and ``failures`` from what the stages wrote: every build, load and comparison must pass."""
    failures = [f"build {b['model']}: {b.get('error', 'failed')}" for b in record["builds"] if not b.get("ok")]
    if record["validate"] is not None and record["validate"].get("exit_code") not in (0, None):
        failures.append(f"validate exited {record['validate']['exit_code']}")
    if record.get("gpu_tests") and record["gpu_tests"].get("exit_code") != 0:
        failures.append(f"the gpu-marked tests exited {record['gpu_tests']['exit_code']}")
    failures += [f"load {x['model']}: {x.get('error', 'not ready')}" for x in record["loads"] if not x.get("loaded")]
    failures += [
        f"answer {c['model']} batch {c['batch']}: {c.get('error') or 'max abs diff ' + str(c.get('max_abs_diff'))}"
        for c in record["comparisons"] if not c.get("ok")
    ]
    built = [b for b in record["builds"] if b.get("ok")]
    if not record["builds"]:
        failures.append("nothing was built")
    elif built and not record["comparisons"]:
        failures.append("no plan was compared with onnxruntime")
    failures += dali_failures(record)
    record["failures"] = failures
    record["ok"] = not failures
    record["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return record


def write_record(record: dict[str, Any], path: Path) -> Path:
    """Atomically, so a CI job never uploads half a record."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


# --- preflight (host) -----------------------------------------------------------------------------------


def probe_host(no_docker: bool) -> dict[str, Any]:
    """This machine's GPUs and tools, or CheckError naming what is missing (the check needs a GPU)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise CheckError("no NVIDIA GPU here (nvidia-smi is not on PATH); run this on the GPU machine you serve on")
    done = subprocess.run([smi, "--query-gpu=index,name,compute_cap,driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, timeout=30, check=False)
    gpus = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not gpus:
        raise CheckError(f"nvidia-smi lists no GPU ({(done.stderr or done.stdout).strip() or 'exit ' + str(done.returncode)})")
    host = {"gpus": gpus, "platform": platform.platform(), "python": sys.version.split()[0]}
    if not no_docker:
        docker = shutil.which("docker")
        if docker is None:
            raise CheckError("docker is not on PATH: install Docker and the NVIDIA container toolkit, or pass --no-docker")
        host["docker"] = subprocess.run([docker, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    return host


# --- the model and its reference answers (build stage) --------------------------------------------------


def sample_input(batch: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [round(rng.uniform(-2.0, 2.0), 4) for _ in range(batch * 3 * 8 * 8)]


def make_models(work: Path) -> dict[str, Path]:
    """model.onnx (fp32) and model_fp16.onnx (float32 IO, float16 inside: what TensorRT 11 builds as fp16)."""
    import numpy as np  # the build container has both; the host does not need them
    import onnx
    from onnx import TensorProto, helper

    weight = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    axes = helper.make_tensor("axes", TensorProto.INT64, (2,), [2, 3])

    def graph(half: bool) -> onnx.ModelProto:
        dtype = TensorProto.FLOAT16 if half else TensorProto.FLOAT
        w = helper.make_tensor("w", dtype, (3, 4), weight.astype(np.float16 if half else np.float32).flatten().tolist())
        nodes = [helper.make_node("Cast", ["input"], ["x"], to=dtype)] if half else []
        nodes += [
            helper.make_node("ReduceMean", ["x" if half else "input", "axes"], ["pooled"], keepdims=0),
            helper.make_node("MatMul", ["pooled", "w"], ["y" if half else "logits"]),
        ]
        nodes += [helper.make_node("Cast", ["y"], ["logits"], to=TensorProto.FLOAT)] if half else []
        g = helper.make_graph(
            nodes, "gpu_check",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 8, 8])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 4])],
            initializer=[w, axes],
        )
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        onnx.checker.check_model(model)
        return model

    out = {}
    for name, half in (("fp32", False), ("fp16", True)):
        folder = work / "export" / name
        folder.mkdir(parents=True, exist_ok=True)
        onnx.save(graph(half), str(folder / "model.onnx"))
        signature = {"format": 1, "inputs": [{"name": "input", "dtype": "float32", "shape": ["batch", 3, 8, 8]}],
                     "outputs": [{"name": "logits", "dtype": "float32", "shape": ["batch", 4]}], "batch_axis": 0}
        (folder / "signature.json").write_text(json.dumps(signature))
        out[name] = folder / "model.onnx"
    return out


def model_name(builder: str, profiles: int, precision: str) -> str:
    return f"check_{builder}_{profiles}p_{precision}"


def profile_options(profiles: int) -> list[str]:
    return [f"--profile=input:{lo}x3x8x8,{opt}x3x8x8,{hi}x3x8x8" for lo, opt, hi in PROFILE_SETS[profiles]]


def config_text(name: str, profiles: int) -> str:
    top = max(hi for _, _, hi in PROFILE_SETS[profiles])
    used = ", ".join(f'"{i}"' for i in range(profiles))
    return (
        f'name: "{name}"\nplatform: "tensorrt_plan"\nmax_batch_size: {top}\n'
        'input [ { name: "input" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] } ]\n'
        'output [ { name: "logits" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        f"instance_group [ {{ kind: KIND_GPU count: 1 profile: [ {used} ] }} ]\n"
    )


def batches(profiles: int) -> list[int]:
    """One request per profile: its largest batch (Triton picks the profile that fits)."""
    return [hi for _, _, hi in PROFILE_SETS[profiles]]


def _run(cmd: list[str], timeout: float = 1800) -> tuple[int, str]:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return 124, f"{cmd[0]} timed out after {timeout:.0f} s"
    except OSError as exc:
        return 127, f"cannot run {cmd[0]} ({exc})"
    return done.returncode, (done.stdout + done.stderr)[-4000:]


def build_stage(work: Path) -> dict[str, Any]:
    """Inside the TensorRT container: build every plan, validate, and record onnxruntime's answers."""
    import onnxruntime as ort  # installed into the build container by the host stage
    import tensorrt

    major = int(str(tensorrt.__version__).split(".")[0])
    onnx_paths = make_models(work)
    result: dict[str, Any] = {"environment": {"tensorrt": str(tensorrt.__version__), "trtexec": shutil.which("trtexec") or "/usr/src/tensorrt/bin/trtexec"}, "builds": [], "references": {}}
    repo = work / "repo"
    for builder in BUILDERS:
        for profiles in PROFILE_SETS:
            for precision in PRECISIONS:
                name = model_name(builder, profiles, precision)
                source = onnx_paths["fp16" if precision == "fp16" and major >= 11 else "fp32"]
                (repo / name).mkdir(parents=True, exist_ok=True)
                (repo / name / "config.pbtxt").write_text(config_text(name, profiles))
                cmd = ["repo-builder", "compile", str(source), "--out", str(repo / name / "1"), "--builder", builder,
                       "--precision", precision, "--max-batch-size", "16", *profile_options(profiles)]
                start = time.monotonic()
                code, log = _run(cmd)
                entry = {"model": name, "builder": builder, "profiles": profiles, "precision": precision, "onnx": source.parent.name,
                         "command": cmd, "ok": code == 0, "seconds": round(time.monotonic() - start, 1)}
                if code != 0:
                    entry["error"] = log.strip().splitlines()[-1] if log.strip() else f"exit {code}"
                else:
                    entry["plan_json"] = json.loads((repo / name / "1" / "plan.json").read_text())
                result["builds"].append(entry)
                session = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
                result["references"][name] = {
                    str(b): session.run(None, {"input": _array(sample_input(b, b), b)})[0].tolist() for b in batches(profiles)
                }
    code, log = _run(["repo-builder", "validate", str(repo), "--gpu", "--format", "json"], timeout=600)
    result["validate"] = {"exit_code": code, "report": _json_or_text(log)}
    # The repository's own GPU-marked tests (real builds through compile and compile-pending).
    code, log = _run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", *GPU_TESTS], timeout=3600)
    result["gpu_tests"] = {"exit_code": code, "tail": log[-3000:]}
    return result


def _array(values: list[float], batch: int) -> Any:
    import numpy as np  # build container only

    return np.asarray(values, dtype=np.float32).reshape(batch, 3, 8, 8)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text[text.index("{"):])
    except ValueError:
        return text


# --- serve stage (inside the Triton container) ----------------------------------------------------------


def _http(url: str, body: dict[str, Any] | None = None, timeout: float = 30) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            raw = answer.read()
            return answer.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)


def compare(model: str, batch: int, got: list[float] | None, expected: list[list[float]], precision: str) -> dict[str, Any]:
    flat = [v for row in expected for v in row]
    entry: dict[str, Any] = {"model": model, "batch": batch, "tolerance": TOLERANCE[precision]}
    if got is None or len(got) != len(flat):
        entry.update(ok=False, error=f"expected {len(flat)} values, got {None if got is None else len(got)}")
        return entry
    diff = max((abs(a - b) for a, b in zip(got, flat, strict=True)), default=0.0)
    entry.update(ok=diff <= TOLERANCE[precision], max_abs_diff=round(diff, 6))
    return entry


def serve_stage(work: Path, built: list[dict[str, Any]], references: dict[str, Any]) -> dict[str, Any]:
    """Start tritonserver on the repository, wait, infer each built model once per profile, compare."""
    with tritonserver(work / "repo", work / "tritonserver.log", "--model-control-mode=none") as after:
        result = _serve_checks(built, references)
    return {**result, **after}


def _serve_checks(built: list[dict[str, Any]], references: dict[str, Any]) -> dict[str, Any]:
    base = "http://127.0.0.1:8000/v2"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and _http(f"{base}/health/live")[0] != 200:
        time.sleep(1)
    time.sleep(2)
    loads, comparisons = [], []
    for b in built:
        code, answer = _http(f"{base}/models/{b['model']}/ready")
        loads.append({"model": b["model"], "loaded": code == 200, **({} if code == 200 else {"error": str(answer)[:500]})})
        if code != 200:
            continue
        for batch in batches(b["profiles"]):
            body = {"inputs": [{"name": "input", "shape": [batch, 3, 8, 8], "datatype": "FP32", "data": sample_input(batch, batch)}]}
            code, answer = _http(f"{base}/models/{b['model']}/infer", body)
            got = answer["outputs"][0]["data"] if code == 200 else None
            entry = compare(b["model"], batch, got, references[b["model"]][str(batch)], b["precision"])
            if code != 200:
                entry["error"] = f"HTTP {code}: {str(answer)[:300]}"
            comparisons.append(entry)
    return {"loads": loads, "comparisons": comparisons}


# --- host orchestration ---------------------------------------------------------------------------------


def _docker(image: str, work: Path, inner: list[str], setup: str = "") -> list[str]:
    script = f"{setup}python3 /src/scripts/gpu_day.py {' '.join(inner)}"
    return ["docker", "run", "--rm", "--gpus", "all", "--shm-size=1g", "-v", f"{SOURCE}:/src:ro", "-v", f"{work}:/work",
            "-w", "/work", image, "bash", "-lc", script]


def stage_command(stage: str, release: str, work: Path, no_docker: bool) -> list[str]:
    inner = ["--triton-release", release, "--stage", stage, "--work", "/work" if not no_docker else str(work)]
    if no_docker:
        return [sys.executable, str(Path(__file__).resolve()), *inner]
    # The build container gets repo-builder (and onnxruntime for the reference answers) from this checkout.
    setup = "pip install --quiet /src onnxruntime pytest >/dev/null && " if stage == "build" else ""
    if stage == "dali-build":
        setup = "pip install --quiet '/src[export,serve,dali]' >/dev/null && "
    # --dali: its build runs in the TensorRT container, its serving in Triton's (which ships the DALI backend).
    return _docker(images(release)[stage.removeprefix("dali-")], work, inner, setup)


def run_host(args: argparse.Namespace) -> int:
    record = new_record(args.triton_release, {})
    try:
        record["host"] = probe_host(args.no_docker)
    except CheckError as exc:
        print(f"gpu-check: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    work = args.keep or Path(tempfile.mkdtemp(prefix="gpu-check."))
    work.mkdir(parents=True, exist_ok=True)
    for stage in ("build", "serve", *(("dali-build", "dali-serve") if args.dali else ())):
        code, log = _run(stage_command(stage, args.triton_release, work.resolve(), args.no_docker), timeout=7200)
        out = work / f"{stage}.json"
        if code != 0 or not out.is_file():
            record["failures"].append(f"{stage} stage exited {code}: {log.strip().splitlines()[-1] if log.strip() else ''}")
            record[f"{stage}_log_tail"] = log
            break
        merge_stage(record, stage, json.loads(out.read_text()))
    finish_record(record)
    write_record(record, args.out)
    verdict = "ok" if record["ok"] else "FAILED: " + "; ".join(record["failures"][:5])
    print(f"gpu-check: {verdict} (record: {args.out})", file=sys.stderr)
    return EXIT_OK if record["ok"] else EXIT_FAILED


def merge_stage(record: dict[str, Any], stage: str, data: dict[str, Any]) -> None:
    if stage == "build":
        record["environment"].update(data.get("environment", {}))
        record["builds"] = data.get("builds", [])
        record["validate"] = data.get("validate")
        record["gpu_tests"] = data.get("gpu_tests")
    elif stage == "dali-build":
        record["dali"] = dict(data)
    elif stage == "dali-serve":
        record.setdefault("dali", {}).update(data)
    else:
        record["loads"] = data.get("loads", [])
        record["comparisons"] = data.get("comparisons", [])
        record["server_log_tail"] = data.get("server_log_tail", "")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.stage == "host":
        return run_host(args)
    work = args.work or Path.cwd()
    if args.stage == "dali-build":
        result = dali_build_stage(work)
    elif args.stage == "dali-serve":
        result = dali_serve_stage(work)
    elif args.stage == "build":
        result = build_stage(work)
        (work / "references.json").write_text(json.dumps(result.pop("references")))
    else:
        built = [b for b in json.loads((work / "build.json").read_text())["builds"] if b.get("ok")]
        result = serve_stage(work, built, json.loads((work / "references.json").read_text()))
    (work / f"{args.stage}.json").write_text(json.dumps(result, indent=1))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
