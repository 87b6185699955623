"""One repository of every family's Python steps, shared by tests/pipelines/test_hostile_requests.py and
test_request_budget.py (issue 40): built once per session (tests/pipelines/conftest.py, ``step_repository``), never
changed; a module that edits configs works on ``linked_copy``. Also images that attack an image step, the server's
peak memory, and a built step imported for its arithmetic."""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import sys
import types
import zlib
from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.main import main
from support.detection_fixtures import IMGSZ, build_tiny_checkpoint, offline_ultralytics, shared_tiny_detector

# image classifier (random weights), tiny detector, tiny text classifier, tiny token classifier (refuse, truncate),
# the tiny text classifier again with small limits (test_request_budget.py's "budget"), a tiny sentence-transformer,
# a tiny instance segmenter (yolov8n-seg) and RapidOCR's text recognizer (its model steps in the Python backend)
STEP_MODELS = ("cls", "det", "txt", "ner", "ner_truncate", "budget", "emb", "seg", "ocr")
# The budget model: 200,000 bytes per request, 12 MiB per execution (test_request_budget.py explains the numbers).
BUDGET_OPTIONS = ["--max-request-bytes", "200000", "--step-memory-mib", "12"]


def build_step_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.tiny_embedder import make_tiny_sentence_transformer
    from repo_builder.export.tiny_models import make_tiny_text_classifier
    from repo_builder.export.tiny_token_classifier import make_tiny_token_classifier

    out = tmp_path_factory.mktemp("step-repo")
    common = ["--runtime", "python", "--out", str(out), "-q"]
    assert main(["build", "image-classifier", "--model", "torchvision:mobilenet_v3_small", "--weights", "random", "--name", "cls",
                 "--no-parity", *common]) == 0
    onnx_path = shared_tiny_detector(tmp_path_factory.getbasetemp())[1]
    assert main(["build", "object-detector", "--from-onnx", str(onnx_path), "--imgsz", str(IMGSZ), "--name", "det", *common]) == 0
    text = make_tiny_text_classifier(tmp_path_factory.mktemp("tiny-text") / "text")
    assert main(["build", "text-classifier", "--model", str(text), "--name", "txt", *common]) == 0
    assert main(["build", "text-classifier", "--model", str(text), "--name", "budget", *BUDGET_OPTIONS, *common]) == 0
    export = tmp_path_factory.mktemp("ner-export") / "out"
    ner = make_tiny_token_classifier(tmp_path_factory.mktemp("tiny-ner") / "ner")
    assert main(["export", "token-classifier", "--model", str(ner), "--out", str(export), "-q"]) == 0
    assert main(["build", "token-classifier", "--from-export", str(export), "--name", "ner", *common]) == 0
    assert main(["build", "token-classifier", "--from-export", str(export), "--name", "ner_truncate", "--long-texts", "truncate",
                 *common]) == 0
    embedder = make_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny-embedder") / "st")
    assert main(["build", "text-embedder", "--model", str(embedder), "--name", "emb", *common]) == 0
    segmenter = shared_tiny_segmenter(tmp_path_factory.getbasetemp())
    assert main(["build", "instance-segmenter", "--from-onnx", str(segmenter), "--imgsz", str(IMGSZ), "--name", "seg", *common]) == 0
    assert main(["build", "text-recognizer", "--from-rapidocr", "--name", "ocr", *common]) == 0
    return out


def shared_tiny_segmenter(base: Path) -> Path:
    """yolov8n-seg.yaml with random weights, recalibrated (support.detection_fixtures), exported dynamic; once per
    session (``base``: pytest's basetemp)."""
    folder = base / "tiny-segmenter"
    onnx_path = folder / "tiny-yolov8n-seg.onnx"
    offline_ultralytics(folder / "ultralytics-config")  # before Ultralytics is first imported
    if not onnx_path.is_file():
        from ultralytics import YOLO

        checkpoint = build_tiny_checkpoint(folder, yaml="yolov8n-seg.yaml")
        Path(YOLO(str(checkpoint), task="segment").export(format="onnx", imgsz=IMGSZ, dynamic=True, verbose=False)).replace(onnx_path)
    return onnx_path


def linked_copy(repository: Path, target: Path) -> Path:
    """A copy of ``repository`` whose files are hard links (instant); replace a file (``replace_file``), never write
    into one, or the shared repository changes too."""
    shutil.copytree(repository, target, copy_function=os.link)
    return target


def replace_file(path: Path, text: str) -> None:
    path.unlink()
    path.write_text(text, encoding="utf-8")


def zeros_png(width: int, height: int, rows: int = 1000, channels: int = 1) -> bytes:
    """A valid width x height grey (``channels`` 1) or RGB (3) PNG of zeros, a few hundred KB for 900 megapixels: one
    deflate block sequence for ``rows`` rows, repeated (Z_FULL_FLUSH resets the compressor, so every block compresses
    alike); the pixels are never held in this process."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    assert height % rows == 0
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    line = channels * width + 1  # the filter byte, then the samples
    block = compressor.compress(b"\0" * (line * rows)) + compressor.flush(zlib.Z_FULL_FLUSH)
    size = line * height
    stream = b"\x78\xda" + block * (height // rows) + compressor.flush() + struct.pack(">I", ((size % 65521) << 16) | 1)
    header = struct.pack(">IIBBBBB", width, height, 8, {1: 0, 3: 2}[channels], 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", stream) + chunk(b"IEND", b"")


def server_pids(server: Any) -> set[int]:
    """tritonserver and its children (the Python stubs)."""
    pids = {server.pid}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == server.pid:
            pids.add(int(stat.parent.name))
    return pids


def reset_server_peaks(server: Any) -> None:
    """Every server process's peak resident size (VmHWM) reset to its current one (/proc/PID/clear_refs, 5), so
    server_peak_rss reads the peak since this call."""
    for pid in server_pids(server):
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
        except OSError:  # a process that ended meanwhile
            continue


def server_peak_rss(server: Any) -> int:
    """The largest peak resident size (VmHWM) of tritonserver and its children (the Python stubs)."""
    pids = server_pids(server)
    peaks = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        peaks += [int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")]
    return max(peaks)


def import_step(model_py: Path, name: str) -> Any:
    """A built step's model.py imported here, for its pure functions (cost arithmetic); triton_python_backend_utils is
    an empty stand-in, so nothing that talks to Triton can run."""
    sys.modules.setdefault("triton_python_backend_utils", types.ModuleType("triton_python_backend_utils"))
    spec = importlib.util.spec_from_file_location(name, model_py)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

