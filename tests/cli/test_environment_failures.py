"""Failures of the machine exit 3 with one sentence, never 4 "internal error" (issue 20, ``environment.py``):
stdout on a full device, a file size limit while writing a report, a closed pipe, a non-UTF-8 output
encoding, a path over the system's limit, a permission error. Real processes, real limits."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from repo_builder.environment import environment_failure

REPO_BUILDER = str(Path(sys.executable).parent / "repo-builder")


def _repository(root: Path, name: str = "m") -> Path:
    model = root / name
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text(f'name: "{name}"\nbackend: "python"\n', encoding="utf-8")
    (model / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    return root


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr
    return lines[0]


def test_validate_exits_3_when_stdout_is_a_full_device(tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run([REPO_BUILDER, "validate", str(_repository(tmp_path / "r"))],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "no space left" in _one_error_line(done.stderr)


def test_validate_exits_3_when_report_exceeds_file_size_limit(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "r")
    for i in range(40):  # enough findings for a report over the 1 KiB limit
        _repository(repo, f"model_{i}")
        (repo / f"model_{i}" / "config.pbtxt").write_text(f'name: "other_{i}"\nbackend: "python"\n')

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    done = subprocess.run([REPO_BUILDER, "validate", str(repo), "--format", f"json={tmp_path / 'out.json'}"],
                          capture_output=True, text=True, timeout=60, preexec_fn=limit)
    assert done.returncode == 3, done.stderr
    assert "file size limit" in _one_error_line(done.stderr)
    assert not (tmp_path / "out.json").exists()  # never half a report


def test_validate_keeps_the_verdicts_exit_code_when_stdout_cannot_encode_a_name(tmp_path: Path) -> None:
    """Issue 38: escapes instead of exit 3, so a CI gate with a latin-1 console keeps its verdict."""
    repo = _repository(tmp_path / "r", "模型")
    plain = subprocess.run([REPO_BUILDER, "validate", str(repo)], capture_output=True, text=True, timeout=60)
    env = {**os.environ, "PYTHONIOENCODING": "latin-1"}  # click re-wraps a plain ASCII stdout itself
    done = subprocess.run([REPO_BUILDER, "validate", str(repo)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == plain.returncode != 3, done.stderr
    assert "模型" in plain.stdout and "\\u6a21\\u578b" in done.stdout


def test_validate_is_a_usage_error_when_repository_path_is_too_long(tmp_path: Path) -> None:
    long_path = tmp_path.joinpath(*["d" * 200] * 25)  # over PATH_MAX (4096)
    done = subprocess.run([REPO_BUILDER, "validate", str(long_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_validate_exits_3_when_stdout_pipe_closes_early(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "r")
    for i in range(300):  # a report far larger than a pipe's buffer
        _repository(repo, f"model_{i}")
        (repo / f"model_{i}" / "config.pbtxt").write_text(f'name: "other_{i}"\nbackend: "python"\n')
    reader, writer = os.pipe()
    os.close(reader)  # nobody reads: the first write gets EPIPE
    done = subprocess.run([REPO_BUILDER, "validate", str(repo)], stdout=writer, stderr=subprocess.PIPE,
                          text=True, timeout=60)
    os.close(writer)
    assert done.returncode == 3, done.stderr
    assert "broken pipe" in _one_error_line(done.stderr)


@pytest.mark.parametrize(
    ("code", "needle"),
    [(errno.ENOSPC, "no space"), (errno.EFBIG, "ulimit -f"), (errno.EACCES, "permission"), (errno.ENAMETOOLONG, "shorter")],
)
def test_environment_failure_names_cause_when_errno_is_the_machines(code: int, needle: str) -> None:
    sentence = environment_failure(OSError(code, os.strerror(code), "/some/file"))
    assert sentence is not None and needle in sentence and "/some/file" in sentence


def test_environment_failure_is_none_when_error_is_a_bug() -> None:
    assert environment_failure(ValueError("bad")) is None
    assert environment_failure(OSError(errno.EINVAL, "invalid")) is None
    assert environment_failure(UnicodeEncodeError("ascii", "é", 0, 1, "x")) is None  # not raised by output


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.mark.slow
def test_build_exits_3_and_keeps_old_repository_when_file_size_limit_is_hit(tmp_path: Path) -> None:
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    model = make_tiny_text_classifier(tmp_path / "tiny-bert", num_labels=3, seed=0)
    out = tmp_path / "work" / "repo"
    command = [REPO_BUILDER, "build", "text-classifier", "--model", str(model), "--runtime", "python",
               "--out", str(out), "--skip-parity"]
    first = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    before = _snapshot(out)

    def limit() -> None:  # 64 KiB: the next export's ONNX cannot be written whole
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    done = subprocess.run(command, capture_output=True, text=True, timeout=600, preexec_fn=limit)
    assert done.returncode == 3, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "file size limit" in last and "internal error" not in done.stderr
    assert _snapshot(out) == before  # the old repository is intact
    assert not [p for p in out.parent.iterdir() if "stage" in p.name]


def test_usage_error_naming_a_path_stderr_cannot_encode_is_escaped_not_exit_3(tmp_path: Path) -> None:
    missing = tmp_path / "模型"
    env = {**os.environ, "PYTHONIOENCODING": "latin-1"}
    done = subprocess.run([REPO_BUILDER, "validate", str(missing)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    assert "\\u6a21\\u578b: no such folder" in _one_error_line(done.stderr)
