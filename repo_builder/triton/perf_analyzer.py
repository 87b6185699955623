"""perf_analyzer (PyPI ``perf-analyzer``, Triton's C++ load generator) as bench's load generator, when it runs.

Found as an explicit path, ``$REPO_BUILDER_PERF_ANALYZER``, the ``perf_analyzer`` package of this Python (its
``bin/perf_analyzer``: the package's own console script swallows the exit code) or ``perf_analyzer`` on PATH;
then started once with ``--version`` to prove it runs. Every real wheel on PyPI (2.58-2.60) is tagged
``manylinux_2_38``: on an older glibc pip installs a 0.1.0 placeholder without the binary, and the real binary
stops at the loader (``GLIBC_2.38' not found``). Either way bench falls back to its Python client with a
one-line note saying why.

One level is one run: closed loop at ``--concurrency-range N`` over gRPC, the requests given as
``--input-data`` JSON (each tensor as base64 with its shape; BYTES elements length-prefixed, as Triton
serializes them), and the figures read from the ``-f`` CSV latency report (times in microseconds).
"""

from __future__ import annotations

import base64
import csv
import importlib.metadata
import importlib.util
import io
import json
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import ToolError

ENVIRONMENT = "REPO_BUILDER_PERF_ANALYZER"
PROBE_SECONDS = 30.0
REPORT = "latency.csv"  # a bare name: perf_analyzer writes per-step CSVs as "<step>_v<version>.<this>" in its cwd
LOADER_ERRORS = ("not found (required by", "error while loading shared libraries")


@dataclass(frozen=True)
class LoadGenerator:
    """Who sends the requests: ``perf_analyzer`` (``binary`` set) or ``python``; ``note`` says why python."""

    kind: str
    binary: Path | None = None
    note: str = ""


@dataclass(frozen=True)
class ReportRow:
    """One concurrency level of perf_analyzer's CSV report (microseconds as it writes them)."""

    concurrency: int
    infer_per_s: float
    p50_us: float
    p90_us: float
    p95_us: float
    p99_us: float
    client_send_us: float
    client_recv_us: float
    server_queue_us: float | None = None  # only when it read the server's statistics
    server_compute_us: float | None = None  # compute input + infer + output


def find_binary(explicit: Path | None = None) -> tuple[Path | None, str]:
    """The perf_analyzer binary to try, or None and why not (one line)."""
    if explicit is not None or os.environ.get(ENVIRONMENT):
        path = explicit or Path(os.environ[ENVIRONMENT])
        return (path, "") if path.is_file() else (None, f"perf_analyzer: {path} is not a file")
    spec = importlib.util.find_spec("perf_analyzer")
    if spec is not None and spec.origin is not None:
        binary = Path(spec.origin).parent / "bin" / "perf_analyzer"
        if binary.is_file():
            return binary, ""
        version = importlib.metadata.version("perf-analyzer")
        return None, (f"perf_analyzer: the installed perf-analyzer {version} has no binary (a placeholder: the real wheels "
                      "are manylinux_2_38 and need glibc 2.38)")
    on_path = shutil.which("perf_analyzer")
    if on_path:
        return Path(on_path), ""
    return None, "perf_analyzer: not installed (pip install perf-analyzer; its wheels need glibc 2.38)"


def probe(binary: Path) -> str:
    """'' when ``binary`` starts, else its error in one line (the loader's GLIBC message, an exec error)."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=PROBE_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"perf_analyzer cannot run: {binary}: {exc}"
    said = (done.stderr + done.stdout).strip()
    if done.returncode == 0 or ("Usage" in said and not any(e in said for e in LOADER_ERRORS)):  # an older one: no --version
        return ""
    first = next((line for line in said.splitlines() if any(e in line for e in LOADER_ERRORS)), said.splitlines()[0] if said else "")
    return f"perf_analyzer cannot run (exit {done.returncode}): {first or 'no output'}"


def choose(prefer: str = "auto", explicit: Path | None = None) -> LoadGenerator:
    """``auto``: perf_analyzer when it runs, else python with the reason; ``python``: python; ``perf_analyzer``:
    it must run (a ToolError saying why not)."""
    if prefer == "python":
        return LoadGenerator("python", note="python client chosen (--load-generator python)")
    binary, why = find_binary(explicit)
    if binary is not None:
        why = probe(binary)
    if binary is not None and not why:
        return LoadGenerator("perf_analyzer", binary=binary)
    if prefer == "perf_analyzer":
        raise ToolError(f"--load-generator perf_analyzer: {why}")
    return LoadGenerator("python", note=f"{why}; measured with the Python gRPC client instead")


def _tensor_bytes(array: Any, wire: str) -> bytes:
    """One tensor as perf_analyzer's b64 content wants it: little-endian raw data; BYTES elements each
    prefixed by their length (uint32, little-endian), as Triton serializes them."""
    if wire == "BYTES":
        parts = []
        for element in array.reshape(-1):
            raw = element if isinstance(element, bytes) else str(element).encode()
            parts.append(struct.pack("<I", len(raw)) + raw)
        return b"".join(parts)
    return bytes(array.astype(array.dtype.newbyteorder("<")).tobytes())


def input_data(payloads: Sequence[Mapping[str, tuple[Any, str]]], batched: bool) -> dict[str, Any]:
    """perf_analyzer's ``--input-data`` JSON for ``payloads`` (sent in turn). With ``batched`` (the model's
    max_batch_size > 0) each entry is one batch row, and ``-b`` gathers rows into a request."""
    entries = []
    for payload in payloads:
        rows = len(next(iter(payload.values()))[0]) if batched else 1
        for row in range(rows):
            entry = {}
            for name, (array, wire) in payload.items():
                part = array[row] if batched else array
                entry[name] = {"content": {"b64": base64.b64encode(_tensor_bytes(part, wire)).decode()}, "shape": list(part.shape)}
            entries.append(entry)
    return {"data": entries}


def command(binary: Path, url: str, model: str, data: Path, *, concurrency: int, seconds: float, warmup: float, batch: int,
            by_count: bool = False) -> list[str]:
    """One closed-loop level: three measurement windows (perf_analyzer's stability rule needs three) in ``seconds``;
    ``by_count``: windows of ``concurrency x 2`` answers instead (at least 1 s each), for a model too slow to
    answer inside a time window."""
    windows = (["--measurement-mode", "count_windows", "--measurement-request-count", str(max(4, concurrency * 2))] if by_count
               else ["--measurement-interval", str(max(1000, int(seconds * 1000 / 3)))])
    return [
        str(binary), "-m", model, "-i", "grpc", "-u", url, "--concurrency-range", str(concurrency),
        "--input-data", str(data), "-b", str(max(1, batch)), *windows,
        "--stability-percentage", "100", "--max-trials", "10", "--warmup-request-count", str(concurrency * 4 if warmup > 0 else 0),
        "-f", REPORT,
    ]


def _number(row: Mapping[str, str], column: str) -> float:
    try:
        return float(row[column])
    except (KeyError, TypeError, ValueError):
        raise ToolError(f"perf_analyzer's CSV report has no number in column {column!r} (columns: {', '.join(row)})") from None


def parse_report(text: str) -> tuple[ReportRow, ...]:
    """perf_analyzer's ``-f`` CSV: a header line, then one row per concurrency level (sorted by throughput)."""
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or "Concurrency" not in reader.fieldnames:
        raise ToolError("perf_analyzer's CSV report has no 'Concurrency' column (was it run with --concurrency-range?)")
    rows = []
    for row in reader:
        server = "Server Queue" in row
        compute = sum(_number(row, c) for c in ("Server Compute Input", "Server Compute Infer", "Server Compute Output")) if server else None
        rows.append(ReportRow(
            concurrency=int(_number(row, "Concurrency")), infer_per_s=_number(row, "Inferences/Second"),
            p50_us=_number(row, "p50 latency"), p90_us=_number(row, "p90 latency"), p95_us=_number(row, "p95 latency"),
            p99_us=_number(row, "p99 latency"), client_send_us=_number(row, "Client Send"), client_recv_us=_number(row, "Client Recv"),
            server_queue_us=_number(row, "Server Queue") if server else None, server_compute_us=compute,
        ))
    if not rows:
        raise ToolError("perf_analyzer's CSV report has a header but no measured level")
    return tuple(rows)


def run_level(
    generator: LoadGenerator, url: str, model: str, payloads: Sequence[Mapping[str, tuple[Any, str]]], *,
    concurrency: int, seconds: float, warmup: float, batch: int,
) -> ReportRow:
    """One concurrency level measured by perf_analyzer; a ToolError with its last words when it fails."""
    if generator.binary is None:
        raise ToolError(f"perf_analyzer is not usable here: {generator.note}")
    with tempfile.TemporaryDirectory(prefix="repo-builder-perf-analyzer-") as scratch:
        work = Path(scratch)
        data = work / "input.json"
        data.write_text(json.dumps(input_data(payloads, batched=batch > 0)), encoding="utf-8")
        for by_count in (False, True):
            cmd = command(generator.binary, url, model, data, concurrency=concurrency, seconds=seconds, warmup=warmup, batch=batch, by_count=by_count)
            try:
                done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=max(300.0, seconds * 20), check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise ToolError(f"perf_analyzer failed on {model}: {exc}") from None
            if "No valid requests recorded" not in done.stdout + done.stderr:
                break  # else the model answers slower than a window: count answers instead
        report = work / REPORT
        if done.returncode != 0 or not report.is_file():
            said = " ".join((done.stderr or done.stdout).split())[-300:]
            raise ToolError(f"perf_analyzer failed on {model} (exit {done.returncode}): {said or 'no output'}")
        rows = parse_report(report.read_text(encoding="utf-8"))
    return next((r for r in rows if r.concurrency == concurrency), rows[-1])
