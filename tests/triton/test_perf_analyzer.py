"""triton/perf_analyzer.py: finding perf_analyzer, proving it starts, its input JSON and its CSV report.

PyPI's perf_analyzer cannot start on this machine (its wheels need glibc 2.38): data/ holds reports written by
hand in its documented format and one captured from perf_analyzer 2.51 (which does start here), and the binaries
below are real files that fail to start the two ways a real one does (an exec error; the loader's missing-GLIBC
message and exit 1).
"""

from __future__ import annotations

import base64
import importlib.util
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from repo_builder.errors import ToolError
from repo_builder.triton.perf_analyzer import (
    ENVIRONMENT,
    choose,
    command,
    find_binary,
    input_data,
    parse_report,
    probe,
)

DATA = Path(__file__).resolve().parent / "data"
GLIBC = "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by perf_analyzer)"


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_parse_report_reads_throughput_percentiles_and_server_times_when_verbose() -> None:
    rows = parse_report((DATA / "perf_analyzer_latency.csv").read_text())
    assert [r.concurrency for r in rows] == [1, 4]
    four = rows[1]
    assert four.infer_per_s == pytest.approx(22.6661)
    assert (four.p50_us, four.p90_us, four.p95_us, four.p99_us) == (172918, 255907, 263011, 272104)
    assert four.server_queue_us == 45418 and four.server_compute_us == 121 + 122659 + 2097


def test_parse_report_reads_a_report_perf_analyzer_251_wrote_here() -> None:
    rows = parse_report((DATA / "perf_analyzer_2.51_captured.csv").read_text())
    assert [(r.concurrency, r.infer_per_s) for r in rows] == [(1, 1750.01), (2, 2535.93)]
    assert (rows[1].p50_us, rows[1].p99_us, rows[1].server_compute_us) == (508, 8212, 14 + 83 + 126)


def test_parse_report_leaves_server_times_empty_when_columns_are_absent() -> None:
    (row,) = parse_report((DATA / "perf_analyzer_latency_client_only.csv").read_text())
    assert row.concurrency == 4 and row.p99_us == 3391 and row.server_queue_us is None and row.server_compute_us is None


@pytest.mark.parametrize(("text", "message"), [
    ("Request Rate,Inferences/Second\n5,4.9\n", "no 'Concurrency' column"),
    ("Concurrency,Inferences/Second,Client Send,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n", "no measured level"),
    ("Concurrency,Inferences/Second,Client Send,Client Recv,p50 latency\n4,2.0,1,1,9\n", "'p90 latency'"),
])
def test_parse_report_refuses_in_one_line_when_report_is_not_a_concurrency_report(text: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        parse_report(text)


def test_input_data_sends_one_row_per_entry_with_length_prefixed_bytes_when_batched() -> None:
    jpegs = [b"\xff\xd8one", b"\xff\xd8second"]
    payloads = [{"IMAGE": (np.array([[j]], dtype=object), "BYTES")} for j in jpegs]
    data = input_data(payloads, batched=True)["data"]
    assert [entry["IMAGE"]["shape"] for entry in data] == [[1], [1]]
    decoded = base64.b64decode(data[1]["IMAGE"]["content"]["b64"])
    assert decoded == struct.pack("<I", len(jpegs[1])) + jpegs[1]


def test_input_data_sends_little_endian_numbers_with_full_shape_when_not_batched() -> None:
    array = np.arange(6, dtype=">f4").reshape(2, 3)  # big-endian in memory: must be sent little-endian
    (entry,) = input_data([{"X": (array, "FP32")}], batched=False)["data"]
    assert entry["X"]["shape"] == [2, 3]
    assert np.frombuffer(base64.b64decode(entry["X"]["content"]["b64"]), dtype="<f4").tolist() == [0, 1, 2, 3, 4, 5]


def test_command_is_one_closed_loop_grpc_level_with_a_csv_report(tmp_path: Path) -> None:
    cmd = command(tmp_path / "pa", "localhost:8001", "img", tmp_path / "in.json", concurrency=4, seconds=9.0, warmup=1.0, batch=1)
    joined = " ".join(cmd)
    for part in ("-m img", "-i grpc", "-u localhost:8001", "--concurrency-range 4", "--measurement-interval 3000", "-b 1", "-f latency.csv",
                 f"--input-data {tmp_path / 'in.json'}"):
        assert part in joined, part


def test_command_counts_answers_instead_of_time_when_asked_by_count(tmp_path: Path) -> None:
    cmd = " ".join(command(tmp_path / "pa", "h:1", "img", tmp_path / "in.json", concurrency=16, seconds=1.5, warmup=0.5, batch=1, by_count=True))
    assert "--measurement-mode count_windows --measurement-request-count 32" in cmd and "--measurement-interval" not in cmd


def test_find_binary_says_not_installed_when_nothing_provides_it(monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("perf_analyzer") is not None or shutil.which("perf_analyzer"):
        pytest.skip(reason="perf_analyzer is installed here")
    monkeypatch.delenv(ENVIRONMENT, raising=False)
    binary, why = find_binary()
    assert binary is None and "not installed" in why


def test_find_binary_names_the_path_when_the_environment_points_nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENVIRONMENT, str(tmp_path / "missing"))
    assert find_binary() == (None, f"perf_analyzer: {tmp_path / 'missing'} is not a file")


def test_probe_reports_the_loader_message_when_glibc_is_too_old(tmp_path: Path) -> None:
    binary = executable(tmp_path / "perf_analyzer", f"#!/bin/sh\ncat >&2 <<'MSG'\nperf_analyzer: {GLIBC}\nMSG\nexit 1\n")
    why = probe(binary)
    assert why.startswith("perf_analyzer cannot run (exit 1): ") and "GLIBC_2.38' not found" in why


def test_probe_reports_the_exec_error_when_the_file_is_no_program(tmp_path: Path) -> None:
    binary = executable(tmp_path / "perf_analyzer", "\x7fnot an ELF\n")
    assert "Exec format error" in probe(binary)


def test_probe_passes_when_the_binary_answers_its_version(tmp_path: Path) -> None:
    assert probe(executable(tmp_path / "perf_analyzer", "#!/bin/sh\necho 2.60.0\n")) == ""


def test_choose_falls_back_to_python_with_the_reason_when_perf_analyzer_cannot_run(tmp_path: Path) -> None:
    binary = executable(tmp_path / "perf_analyzer", f"#!/bin/sh\ncat >&2 <<'MSG'\nperf_analyzer: {GLIBC}\nMSG\nexit 1\n")
    generator = choose("auto", binary)
    assert generator.kind == "python" and generator.binary is None
    assert "GLIBC_2.38" in generator.note and generator.note.endswith("measured with the Python gRPC client instead")
    with pytest.raises(ToolError, match="--load-generator perf_analyzer: perf_analyzer cannot run"):
        choose("perf_analyzer", binary)
    assert choose("python", binary).kind == "python"


def test_choose_takes_perf_analyzer_when_it_starts(tmp_path: Path) -> None:
    binary = executable(tmp_path / "perf_analyzer", "#!/bin/sh\necho 2.60.0\n")
    assert choose("auto", binary).kind == "perf_analyzer" and choose("auto", binary).binary == binary
