"""Bad input never makes the validator raise: mangled configs and layouts always give diagnostics."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.validate_repo_helpers import (
    ADD_SUB_CONFIG,
    ADD_SUB_MODEL_PY,
    codes,
    make_add_sub,
    make_model,
    onnx_bytes,
    validate,
)

from repo_builder.onnx_io import OnnxReadError, parse_onnx_signature
from repo_builder.validate.analysis.python_source import check_python_source
from repo_builder.validate.records import Severity
from repo_builder.validate.report import Report
from repo_builder.validate.reporters import render_report
from repo_builder.validate.scan import MAX_CONFIG_BYTES

# BAD_INPUT_EXAMPLES=500 explores further than CI does.
FAST = settings(max_examples=int(os.environ.get("BAD_INPUT_EXAMPLES", "40")), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _judge(root: Path, strict: bool = False) -> None:
    """Validate and render in every format; any exception fails the property."""
    report = validate(root, strict=strict)
    for fmt in ("text", "json", "github", "junit"):
        render_report(report, fmt).encode("utf-8")


@st.composite
def mangled_config(draw: st.DrawFn) -> bytes:
    """Triton's add_sub config with random cuts, insertions and byte noise."""
    data = bytearray(ADD_SUB_CONFIG.encode())
    for _ in range(draw(st.integers(1, 4))):
        pos = draw(st.integers(0, len(data)))
        op = draw(st.sampled_from(["cut", "insert", "noise"]))
        if op == "cut":
            del data[pos : pos + draw(st.integers(1, 40))]
        elif op == "insert":
            data[pos:pos] = draw(st.sampled_from([b"{", b"}", b"[", b"]", b":", b'"', b"-1", b"dims: [0]", b"\n", b"max_batch_size: -3", b"platform: \"x\"", b"input [ ]", b"\xff\xfe"]))
        else:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=20))
    return bytes(data)


@FAST
@given(config=st.one_of(mangled_config(), st.binary(max_size=400)))
def test_validate_never_raises_when_config_is_mangled(config: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model = make_model(root, "add_sub", None, {1: {"model.py": ADD_SUB_MODEL_PY}})
        (model / "config.pbtxt").write_bytes(config)
        _judge(root)
        _judge(root, strict=True)


NAMES = st.one_of(
    st.sampled_from(["1", "2", "01", "0", "-1", "+1", " 1", "1a", "99999999999999999999", "warmup", ".hidden", "model.py", "model.onnx", "config.pbtxt", "x.identity"]),
    st.binary(min_size=1, max_size=8).map(lambda b: os.fsdecode(b.replace(b"/", b"_").replace(b"\x00", b"_"))).filter(lambda n: n not in (".", "..")),
)
CONTENT = st.one_of(st.just(ADD_SUB_MODEL_PY.encode()), st.binary(max_size=64), st.just(ADD_SUB_CONFIG.encode()))
TREE = st.recursive(CONTENT, lambda children: st.dictionaries(NAMES, children, max_size=4), max_leaves=12)


def _write(folder: Path, tree: object) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    assert isinstance(tree, dict)
    for name, content in tree.items():
        target = folder / name
        try:
            if isinstance(content, dict):
                _write(target, content)
            else:
                target.write_bytes(content)
        except OSError:
            pass  # a name the filesystem refuses (too long, ...): skip it


@FAST
@given(models=st.dictionaries(NAMES, st.dictionaries(NAMES, TREE, max_size=4), min_size=1, max_size=4))
def test_validate_never_raises_when_layout_is_random(models: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, tree in models.items():
            _write(root / name, tree)
        _judge(root)


def test_validate_reports_huge_config_without_reading_it(repo: Path) -> None:
    model = make_model(repo, "m", None, {1: {"model.py": ADD_SUB_MODEL_PY}})
    with open(model / "config.pbtxt", "wb") as fh:
        fh.truncate(MAX_CONFIG_BYTES + 1)  # sparse: no disk used
    assert os.path.getsize(model / "config.pbtxt") > MAX_CONFIG_BYTES
    report = validate(repo)
    assert codes(report, "m", Severity.ERROR)
    assert any("over the" in d.message for d in report.diagnostics)


def test_validate_reports_config_that_is_a_folder(repo: Path) -> None:
    model = make_model(repo, "m", None, {1: {"model.py": ADD_SUB_MODEL_PY}})
    (model / "config.pbtxt").mkdir()
    report = validate(repo)
    assert any("is a folder" in d.message for d in report.diagnostics if d.severity == Severity.ERROR)


def test_validate_does_not_block_on_fifos(repo: Path) -> None:
    model = make_model(repo, "m", None, {1: {}})
    os.mkfifo(model / "config.pbtxt")
    os.mkfifo(model / "1" / "model.py")
    onnx_model = make_model(repo, "o", 'backend: "onnxruntime"\n', {1: {}})
    os.mkfifo(onnx_model / "1" / "model.onnx")
    done: list[Report] = []
    worker = threading.Thread(target=lambda: done.append(validate(repo)), daemon=True)
    worker.start()
    worker.join(30)
    assert done, "validate blocked on a FIFO"
    report = done[0]
    assert any("not a regular file" in d.message for d in report.diagnostics if d.model == "m")
    assert any("not a regular file" in d.message for d in report.diagnostics if d.model == "o")


def test_validate_reports_symlinks_leaving_repository(repo: Path, tmp_path: Path) -> None:
    model = make_add_sub(repo)
    (model / "labels.txt").symlink_to("/etc/hostname")
    (model / "1" / "extra").symlink_to(tmp_path)
    (repo / "escaped").symlink_to(tmp_path / "nowhere")  # dangling: not a folder, so not a model
    report = validate(repo)
    assert len([d for d in report.diagnostics if d.code == "RB103"]) == 2


def test_validate_reports_unreadable_files_via_dangling_symlinks(repo: Path) -> None:
    # Running as root, chmod 000 cannot make a file unreadable; a dangling link is unreadable for anyone.
    model = make_model(repo, "m", 'backend: "python"\n', {1: {}})
    (model / "1" / "model.py").symlink_to(repo / "missing.py")
    (model / "config.pbtxt").unlink()
    (model / "config.pbtxt").symlink_to(repo / "missing.pbtxt")
    report = validate(repo)
    assert report.diagnostics and not report.ok


def test_validate_reports_non_utf8_names(repo: Path) -> None:
    make_model(repo, os.fsdecode(b"m\xe9"), 'backend: "python"\n', {os.fsdecode(b"\xff"): {"model.py": ADD_SUB_MODEL_PY}})
    report = validate(repo)
    assert {"RB104", "RB107"} <= codes(report)


VALID_ONNX = onnx_bytes([("x", "FLOAT", ["N", 4]), ("w", "FLOAT", [4])], [("y", "FLOAT", ["N", 4])], initializers=["w"])


@FAST
@given(data=st.data())
def test_onnx_reader_raises_only_read_errors_when_file_is_mangled(data: st.DataObject) -> None:
    raw = bytearray(VALID_ONNX)
    for _ in range(data.draw(st.integers(1, 6))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    for blob in (bytes(raw), bytes(raw[:cut]), data.draw(st.binary(max_size=200))):
        try:
            sig = parse_onnx_signature(blob)
        except OnnxReadError as exc:
            assert str(exc)  # a message for the diagnostic
        else:
            assert all(isinstance(t.name, str) for t in (*sig.inputs, *sig.outputs))


@FAST
@given(source=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)))
def test_python_model_check_never_raises_when_source_is_garbage(source: bytes) -> None:
    for message, _line, _column, _severity in check_python_source(source, "model.py"):
        assert message
