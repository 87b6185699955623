"""Issue 28: offline validate reads nothing it should not, and no content crashes it or reaches a terminal raw.

Each test is one finding of the issue's "Why" list and failed on the code before it (validate runs as a
subprocess, as CI runs it: a hang is a timeout, runaway memory hits an address-space limit, a crash is exit 4).
"""

from __future__ import annotations

import json
import os
import pty
import resource
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.validate_repo_helpers import ADD_SUB_MODEL_PY, make_add_sub, make_model, onnx_bytes, onnx_config

SECRET = "ghp_SECRETtoken4242"
ROOT = Path(__file__).resolve().parents[2]
TIME_LIMIT = 60.0
MEMORY_LIMIT = 1 << 30  # address space; the /dev/zero read grew to 24 GB before the fix

PLAN_CONFIG = """\
name: "bert"
platform: "tensorrt_plan"
max_batch_size: 8
input [ { name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 2 ] } ]
instance_group [ { kind: KIND_GPU count: 1 } ]
"""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_validate(*args: str, timeout: float = TIME_LIMIT) -> subprocess.CompletedProcess[str]:
    """``repo-builder validate ARGS`` in a child with a time and a memory limit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "repo_builder.cli.main", "validate", *args],
        capture_output=True, text=True, timeout=timeout, env=env, preexec_fn=_limits, cwd=ROOT,
    )


def _plan_repo(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    version = repo / "bert" / "1"
    version.mkdir(parents=True)
    (repo / "bert" / "config.pbtxt").write_text(PLAN_CONFIG)
    (version / "model.plan").write_bytes(b"serialized engine bytes")
    return repo, version / "plan.json"


def _assert_judged(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


def test_sidecar_link_out_not_opened_when_plan_json_points_at_a_secret(tmp_path: Path) -> None:
    repo, sidecar = _plan_repo(tmp_path)
    secret = tmp_path / "ci-secret.json"
    secret.write_text(json.dumps({"format": SECRET, "plans": {}}))
    sidecar.symlink_to(secret)
    before = secret.stat().st_atime_ns
    os.utime(secret, ns=(before - 10**12, secret.stat().st_mtime_ns))  # relatime: a read would move it
    atime = secret.stat().st_atime_ns
    result = run_validate(str(repo), "--triton-release", "24.08", "--format", "json")
    _assert_judged(result)
    assert SECRET not in result.stdout + result.stderr
    assert secret.stat().st_atime_ns == atime  # never read
    found = [d for d in json.loads(result.stdout)["diagnostics"] if d["path"].endswith("plan.json")]
    assert any("leaves the repository" in d["message"] for d in found)


def test_sidecar_fifo_judged_without_hanging_when_plan_json_is_a_fifo(tmp_path: Path) -> None:
    repo, sidecar = _plan_repo(tmp_path)
    os.mkfifo(sidecar)
    result = run_validate(str(repo), "--format", "json", timeout=30)
    _assert_judged(result)
    assert any("not a regular file" in d["message"] for d in json.loads(result.stdout)["diagnostics"])


def test_sidecar_device_not_read_when_plan_json_links_to_dev_zero(tmp_path: Path) -> None:
    repo, sidecar = _plan_repo(tmp_path)
    sidecar.symlink_to("/dev/zero")
    result = run_validate(str(repo), "--format", "json", timeout=30)
    _assert_judged(result)


@pytest.mark.parametrize("where", ["manifest", "sidecar"])
def test_json_nested_deep_is_a_finding_when_nested_100000_deep(tmp_path: Path, where: str) -> None:
    repo, sidecar = _plan_repo(tmp_path)
    deep = "[" * 100_000 + "]" * 100_000
    (repo / "repo-builder.json" if where == "manifest" else sidecar).write_text(deep)
    result = run_validate(str(repo), "--format", "json")
    _assert_judged(result)
    found = [d for d in json.loads(result.stdout)["diagnostics"] if "nests JSON deeper" in d["message"]]
    assert [d["code"] for d in found] == ["RB005" if where == "manifest" else "RB709"]


def test_unknown_data_type_named_as_triton_does_when_ensemble_input_is_99(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_add_sub(repo)
    make_model(
        repo, "ens",
        'name: "ens"\nplatform: "ensemble"\n'
        'input [ { name: "A" data_type: 99 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "C" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'ensemble_scheduling { step [ { model_name: "add_sub" model_version: -1 input_map { key: "INPUT0" value: "A" }'
        ' input_map { key: "INPUT1" value: "B" } output_map { key: "OUTPUT0" value: "C" } } ] }\n',
        {1: {}},
    )
    result = run_validate(str(repo), "--format", "json")
    _assert_judged(result)
    messages = [d["message"] for d in json.loads(result.stdout)["diagnostics"] if d["model"] == "ens"]
    assert any("data_type 99" in m and "'<invalid>'" in m for m in messages)


def test_unknown_data_type_named_as_triton_does_when_onnx_config_says_99(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    config = onnx_config("m", 0, [("x", "TYPE_FP32", [4])], [("y", "TYPE_FP32", [4])]).replace(
        "data_type: TYPE_FP32", "data_type: 99", 1
    )
    make_model(repo, "m", config, {1: {"model.onnx": onnx_bytes([("x", 1, [4])], [("y", 1, [4])])}})
    result = run_validate(str(repo), "--format", "json")
    _assert_judged(result)
    assert any("data_type 99" in d["message"] for d in json.loads(result.stdout)["diagnostics"])


def test_python_model_too_deep_is_an_error_when_one_expression_nests_100000_deep(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    model = make_add_sub(repo)
    (model / "1" / "model.py").write_text(ADD_SUB_MODEL_PY + "\nX = " + "-" * 100_000 + "1\n")
    result = run_validate(str(repo), "--format", "json")
    found = [d for d in json.loads(result.stdout)["diagnostics"] if d["code"] == "RB407"]
    assert [d["severity"] for d in found] == ["error"] and result.returncode == 1  # CPython cannot compile it
    assert "fails with MemoryError" in found[0]["message"]


def test_text_report_escapes_content_when_a_quoted_config_line_holds_cr_bel_esc(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    model = make_add_sub(repo)
    config = (model / "config.pbtxt").read_text()
    (model / "config.pbtxt").write_text(config.replace('name: "add_sub"', 'name: "bogus\r\x07\x1b[2J\x9b\u202e"'))
    result = run_validate(str(repo))
    _assert_judged(result)
    assert not any(c in result.stdout for c in "\r\x07\x1b\x9b\u202e")
    assert "bogus\\r\\x07\\x1b[2J\\x9b\\u202e" in result.stdout


def _run_on_terminal(repo: Path) -> bytes:
    """``validate REPO`` with stdout on a pseudo-terminal (click strips escapes only when it is not one)."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "repo_builder.cli.main", "validate", str(repo)],
        stdout=slave, stderr=slave, env=env, cwd=ROOT, preexec_fn=_limits,
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + TIME_LIMIT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(master)
    return out


def test_terminal_output_escapes_names_when_a_folder_name_holds_esc_and_bidi(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_add_sub(repo, "x\x1b]0;pwned\x07\u202eevil")
    out = _run_on_terminal(repo).decode("utf-8", "replace")
    assert "\x1b]0;" not in out and "\u202e" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07\\u202eevil" in out


def test_text_report_caps_one_rule_when_a_model_has_thousands_of_findings(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    inputs = "\n".join(f'input {{ name: "i{i}" data_type: TYPE_FP32 dims: [ 0 ] }}' for i in range(3000))
    config = f'name: "m"\nbackend: "python"\n{inputs}\noutput {{ name: "o" data_type: TYPE_FP32 dims: [ 1 ] }}\n'
    make_model(repo, "m", config, {1: {"model.py": ADD_SUB_MODEL_PY}})
    text = run_validate(str(repo))
    _assert_judged(text)
    assert text.stdout.count("RB203 io-dims-and-reshape") == 20
    assert "2,980 more RB203 finding(s)" in text.stdout
    data = json.loads(run_validate(str(repo), "--format", "json").stdout)
    assert sum(1 for d in data["diagnostics"] if d["code"] == "RB203") == 3000
