"""The GPU-day check's DALI part (``scripts/gpu-check --dali``): build ``--preprocess dali`` and serve it on a GPU.

WRITTEN, NOT YET RUN: this machine has no GPU. Nothing here (or in docs/performance.md) claims a GPU figure
until a record written by this stage on a GPU exists.

- ``dali-build`` (in the TensorRT container, repo-builder installed with the export and dali extras): builds
  ``resnet50 --weights random --runtime onnxruntime --preprocess dali`` into WORK/dali-repo, writes the benchmark
  JPEGs (scripts/bench/photos.py) and torchvision's reference tensor of the first one.
- ``dali-serve`` (in the Triton container, which ships the DALI backend): starts tritonserver on it, checks the
  DALI step's answer against the reference (mean/max abs, normalised), then measures images/s for the DALI
  step alone and for the whole ensemble (HTTP binary tensors, ``CONCURRENCY`` threads, ``SECONDS`` each,
  500x375 and 1920x1080 JPEGs).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_day_server import tritonserver

SOURCE = Path(__file__).resolve().parents[1]
NAME = "rn50dali"
SIZES = ("500x375", "1920x1080")
CONCURRENCY = 8
SECONDS = 15.0
IMAGES_PER_SIZE = 16
MEAN_LIMIT, MAX_LIMIT = 0.02, 0.25


def dali_build_stage(work: Path) -> dict[str, Any]:
    """Build the repository and the inputs; the reference is torchvision's transforms on the first 500x375 JPEG."""
    sys.path.insert(0, str(SOURCE / "scripts" / "bench"))
    import io

    import torchvision  # the export extra, installed into the build container by the host stage
    from photos import photos
    from PIL import Image

    repo = work / "dali-repo"
    argv = ["repo-builder", "build", "resnet50", "--weights", "random", "--runtime", "onnxruntime", "--preprocess", "dali",
            "--name", NAME, "--out", str(repo), "--force", "-q"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600)
    result: dict[str, Any] = {"build": {"argv": argv[1:], "exit_code": done.returncode, "log_tail": (done.stdout + done.stderr)[-3000:]}}
    inputs = work / "dali-images"
    inputs.mkdir(exist_ok=True)
    for size in SIZES:
        for index, data in enumerate(photos(size, IMAGES_PER_SIZE, seed=11)):
            (inputs / f"{size}-{index:02d}.jpg").write_bytes(data)
    first = (inputs / f"{SIZES[0]}-00.jpg").read_bytes()
    transforms = torchvision.models.ResNet50_Weights.IMAGENET1K_V2.transforms()
    reference = transforms(Image.open(io.BytesIO(first)).convert("RGB")).numpy().reshape(-1)
    (work / "dali-reference.f32").write_bytes(reference.astype("<f4").tobytes())
    return result


def _binary_infer(url: str, inputs: list[tuple[str, str, list[int], bytes]], output: str | None, timeout: float = 60) -> tuple[int, bytes]:
    """One request with binary tensors (Triton's HTTP binary data extension); the answer's raw bytes."""
    header = {"inputs": [{"name": n, "datatype": t, "shape": s, "parameters": {"binary_data_size": len(b)}} for n, t, s, b in inputs]}
    if output is not None:
        header["outputs"] = [{"name": output, "parameters": {"binary_data": True}}]
    head = json.dumps(header).encode()
    body = head + b"".join(b for _, _, _, b in inputs)
    request = urllib.request.Request(url, data=body, headers={"Inference-Header-Content-Length": str(len(head)),
                                                              "Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            raw = answer.read()
            length = int(answer.headers.get("Inference-Header-Content-Length") or len(raw))
            return answer.status, raw[length:]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc).encode()


def _image_input(data: bytes) -> tuple[str, str, list[int], bytes]:
    return ("IMAGE", "UINT8", [1, len(data)], data)


def _check_answer(base: str, work: Path) -> dict[str, Any]:
    first = (work / "dali-images" / f"{SIZES[0]}-00.jpg").read_bytes()
    code, raw = _binary_infer(f"{base}/models/{NAME}_preprocess/infer", [_image_input(first)], "pixel_values")
    if code != 200:
        return {"ok": False, "error": f"HTTP {code}: {raw[:300]!r}"}
    reference = (work / "dali-reference.f32").read_bytes()
    count = len(reference) // 4
    if len(raw) != len(reference):
        return {"ok": False, "error": f"expected {count} float32 values, got {len(raw) // 4}"}
    ours, ref = struct.unpack(f"<{count}f", raw), struct.unpack(f"<{count}f", reference)
    diffs = [abs(a - b) for a, b in zip(ours, ref, strict=True)]
    mean, worst = sum(diffs) / count, max(diffs)
    return {"ok": mean <= MEAN_LIMIT and worst <= MAX_LIMIT, "mean_abs_diff": round(mean, 6), "max_abs_diff": round(worst, 6),
            "note": "the GPU decoder (nvJPEG) against torchvision on PIL: the figure this machine could not measure"}


def _throughput(url: str, images: list[bytes]) -> dict[str, Any]:
    """Images/s at CONCURRENCY threads for SECONDS, one image per request (the dynamic batcher joins them)."""
    done, failed = [0], [0]
    lock = threading.Lock()
    stop = time.monotonic() + SECONDS

    def worker(offset: int) -> None:
        index = offset
        while time.monotonic() < stop:
            code, _ = _binary_infer(url, [_image_input(images[index % len(images)])], None)
            with lock:
                (done if code == 200 else failed)[0] += 1
            index += 1

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(CONCURRENCY)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    return {"images_per_s": round(done[0] / elapsed, 1), "requests": done[0], "failed": failed[0], "seconds": round(elapsed, 1),
            "concurrency": CONCURRENCY}


def dali_serve_stage(work: Path) -> dict[str, Any]:
    """tritonserver on WORK/dali-repo: readiness, the answer against torchvision, images/s per size."""
    base = "http://127.0.0.1:8000/v2"
    result: dict[str, Any] = {"ran_on_gpu": True, "models": {}, "throughput": {}}
    with tritonserver(work / "dali-repo", work / "dali-tritonserver.log") as after:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{base}/models/{NAME}/ready", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(2)
        for model in (f"{NAME}_preprocess", NAME):
            try:
                with urllib.request.urlopen(f"{base}/models/{model}/ready", timeout=5) as answer:
                    result["models"][model] = answer.status == 200
            except (urllib.error.URLError, OSError):
                result["models"][model] = False
        if all(result["models"].values()):
            result["answer"] = _check_answer(base, work)
            for size in SIZES:
                images = [p.read_bytes() for p in sorted((work / "dali-images").glob(f"{size}-*.jpg"))]
                result["throughput"][size] = {
                    "dali_step": _throughput(f"{base}/models/{NAME}_preprocess/infer", images),
                    "ensemble": _throughput(f"{base}/models/{NAME}/infer", images),
                }
    return {**result, **after}


def dali_failures(record: dict[str, Any]) -> list[str]:
    """What the DALI part of a record says failed (empty when it passed or did not run)."""
    dali = record.get("dali")
    if not dali:
        return []
    failures = []
    build = dali.get("build", {})
    if build.get("exit_code") not in (0, None):
        failures.append(f"dali build exited {build['exit_code']}")
    failures += [f"dali load {m}: not ready" for m, ok in dali.get("models", {}).items() if not ok]
    answer = dali.get("answer")
    if answer is not None and not answer.get("ok"):
        failures.append(f"dali answer: {answer.get('error') or 'mean ' + str(answer.get('mean_abs_diff'))}")
    return failures
