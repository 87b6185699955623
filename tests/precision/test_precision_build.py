"""`build --precision`: the model step reduced in its graph, served, and gated against fp32 on held-out data.

A tiny sentence-transformers model, exported once; a copy of the export with one layer made sensitive to
int8 (support/precision_models.py) for the gate and the fallback. Texts are English sentences from the
standard library's docstrings, calibration and accuracy kept apart."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import onnx
import pytest
from support.precision_models import make_one_layer_sensitive
from support.sentences import sentences

from repo_builder.cli.main import main
from repo_builder.compile import CompileSettings, derive_profiles
from repo_builder.compile.precision import choose_precision, read_onnx_facts
from repo_builder.compile.trtexec import trtexec_command
from repo_builder.errors import RefusedError, UserError
from repo_builder.export.tiny_embedder import make_tiny_sentence_transformer
from repo_builder.pipelines.plan_gate import gated_ensembles, record_plan_gate, regate
from repo_builder.precision.answers import REFERENCE_FILE
from repo_builder.repository.publish import PublishOptions, validate_local
from repo_builder.spec import read_signature

PARSER_11 = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "trtexec-parse" / "trtexec-parse-11.1"
MODEL_STEP = "text_embedder_model"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("precision")
    model = make_tiny_sentence_transformer(root / "st")
    assert main(["export", "text-embedder", "--model", str(model), "--out", str(root / "export"), "-q"]) == 0
    shutil.copytree(root / "export", root / "sensitive")
    (root / "sensitive.txt").write_text(make_one_layer_sensitive(root / "sensitive" / "model.onnx"))
    texts = sentences(180)
    (root / "calibration.txt").write_text("\n".join(texts[:60]), encoding="utf-8")
    (root / "accuracy.txt").write_text("\n".join(texts[60:]), encoding="utf-8")
    return {"root": root, "export": root / "export", "sensitive": root / "sensitive", "calibration": root / "calibration.txt",
            "accuracy": root / "accuracy.txt", "sensitive_node": root / "sensitive.txt"}


def _build(export: Path, out: Path, *extra: str) -> int:
    return main(["build", "text-embedder", "--from-export", str(export), "--out", str(out), "-q", *extra])


def _precision(repo: Path, version: str = "1") -> dict[str, Any]:
    manifest = json.loads((repo / "repo-builder.json").read_text())
    return manifest["models"][MODEL_STEP]["versions"][version]["settings"]["precision"]


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def _types(model: Any) -> set[str]:
    name = onnx.TensorProto.DataType.Name
    return {name(t.data_type) for t in model.graph.initializer}


@pytest.mark.parametrize("precision, wanted", [("fp16", "FLOAT16"), ("bf16", "BFLOAT16")])
def test_float_precision_writes_a_converted_model_step_that_tensorrt11_builds_strongly_typed(
    data: dict[str, Path], tmp_path: Path, precision: str, wanted: str
) -> None:
    repo = tmp_path / "repo"
    assert _build(data["export"], repo, "--precision", precision, "--accuracy-data", str(data["accuracy"])) == 0
    onnx_path = repo / MODEL_STEP / "1" / "model.onnx"
    model = onnx.load(str(onnx_path))
    assert wanted in _types(model)
    # The clients' and the other steps' types are kept: inputs int64, the embedding float32.
    signature = read_signature(data["export"] / "signature.json")
    io_types = {v.name: onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type) for v in (*model.graph.input, *model.graph.output)}
    assert io_types == {t.name: t.onnx_type for t in (*signature.inputs, *signature.outputs)}
    record = _precision(repo)
    assert record["precision"] == precision and record["accuracy"]["passed"] is True
    assert record["accuracy"]["figures"]["mean_cosine"] >= 0.999 and record["accuracy"]["compared"] == 120
    assert "LayerNormalization" in record["conversion"]["kept_float_ops"]
    assert ("emulated" in record["accuracy"]["measured_on"]) == (precision == "bf16")
    # TensorRT 11 (strongly typed only): the ONNX carries the precision, and its trtexec takes the command.
    choice = choose_precision(precision, 11, read_onnx_facts(onnx_path))
    assert choice.strongly_typed and choice.flags == ()
    settings = CompileSettings(max_batch_size=8, max_seq_len=64, precision=precision)
    dynamic = tuple(t.name for t in signature.inputs if t.dynamic_axes)
    cmd = trtexec_command(onnx_path, onnx_path.with_suffix(".plan"), derive_profiles(signature, settings), dynamic, choice, settings)
    if not PARSER_11.is_file():
        pytest.skip(reason=f"NVIDIA's trtexec 11.1 option parser is not at {PARSER_11}")
    done = subprocess.run([str(PARSER_11), *cmd[1:]], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0 and done.stdout.startswith("ACCEPTED:"), done.stdout + done.stderr


def test_int8_gate_refuses_below_the_threshold_and_leaves_the_repository_then_fallback_passes(
    data: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "repo"
    assert _build(data["export"], repo) == 0  # an fp32 build already there
    before = _snapshot(repo)
    int8 = ("--precision", "int8", "--calibration-data", str(data["calibration"]), "--accuracy-data", str(data["accuracy"]),
            "--min-accuracy", "0.995")
    capsys.readouterr()
    assert _build(data["sensitive"], repo, *int8) == 1
    error = capsys.readouterr().err
    assert "--precision int8: mean_cosine 0." in error and "below --min-accuracy 0.995; nothing was written" in error
    assert _snapshot(repo) == before
    assert _build(data["sensitive"], repo, *int8, "--fallback", "auto") == 0
    record = _precision(repo, "2")
    sensitive = data["sensitive_node"].read_text()
    assert record["accuracy"]["passed"] and record["accuracy"]["figures"]["mean_cosine"] >= 0.995
    assert record["fallback"]["float_nodes"][0]["node"] == sensitive  # ranked worst, returned first
    assert record["fallback"]["rounds"][0]["passed"] is False and record["fallback"]["rounds"][-1]["passed"] is True
    model = onnx.load(str(repo / MODEL_STEP / "2" / "model.onnx"))
    produced_by = {o: n.op_type for n in model.graph.node for o in n.output}
    matmuls = {n.name: n for n in model.graph.node if n.op_type == "MatMul"}
    assert produced_by.get(matmuls[sensitive].input[0]) != "DequantizeLinear"  # stayed float
    quantized = [n for n in matmuls.values() if produced_by.get(n.input[0]) == "DequantizeLinear"]
    assert len(quantized) >= len(matmuls) - len(record["fallback"]["float_nodes"])
    scales = [i for i in model.graph.initializer if i.name.endswith("_zero_point")]
    assert scales and all(not any(onnx.numpy_helper.to_array(z).reshape(-1)) for z in scales)  # symmetric: zero points 0
    _gate_runs_again_on_what_is_served(repo, data, record)


def _gate_runs_again_on_what_is_served(repo: Path, data: dict[str, Path], record: dict[str, Any]) -> None:
    """What compile-pending --accuracy-data does after building plans, here against the ONNX Runtime model."""
    assert (repo / MODEL_STEP / "2" / REFERENCE_FILE).is_file()
    gate = regate(repo, data["accuracy"], measured_on="ONNX Runtime again", log=lambda _line: None)
    assert gate.passed and gate.version == "2" and gate.compared == 120
    assert gate.figures["mean_cosine"] == pytest.approx(record["accuracy"]["figures"]["mean_cosine"], abs=1e-5)
    with pytest.raises(UserError, match="not the data text_embedder_model/2 was gated on"):
        regate(repo, data["calibration"], measured_on="-", log=lambda _line: None)
    assert gated_ensembles(repo) == ["text_embedder"]
    record_plan_gate(repo, dataclasses.replace(gate, passed=False))  # as a plan below the gate would be recorded
    assert _precision(repo, "2")["served_gate"]["passed"] is False
    with pytest.raises(RefusedError, match=r"text_embedder_model/2 failed the accuracy gate when served"):
        validate_local(repo, PublishOptions(), lambda _line: None)


def test_precision_options_are_refused_before_any_export_when_inconsistent(data: dict[str, Path], tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "repo"
    overlapping = tmp_path / "overlap.txt"
    overlapping.write_text(data["accuracy"].read_text().splitlines()[5] + "\nA sentence of its own, never in the other set.\n")
    cases = {
        ("--precision", "int8", "--calibration-data", str(overlapping), "--accuracy-data", str(data["accuracy"])):
            "are also in --calibration-data",
        ("--precision", "int8", "--accuracy-data", str(data["accuracy"])): "--precision int8 needs --calibration-data",
        ("--precision", "fp16"): "--precision fp16 needs --accuracy-data",
        ("--accuracy-data", str(data["accuracy"])): "--accuracy-data: apply to --precision fp16|bf16|int8 only",
        ("--precision", "fp16", "--accuracy-data", str(data["accuracy"]), "--fallback", "auto"): "applies to --precision int8 only",
        ("--precision", "fp16", "--accuracy-data", str(data["accuracy"]), "--min-accuracy", "2"): "--min-accuracy must be between 0 and 1",
    }
    for extra, message in cases.items():
        capsys.readouterr()
        assert _build(data["export"], out, *extra) == 2, extra
        error = capsys.readouterr().err.strip()
        assert message in error and len(error.splitlines()) == 1, error
        assert not out.exists()
