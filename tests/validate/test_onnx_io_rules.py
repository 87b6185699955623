"""RB6xx: ONNX Runtime models' configs against their graphs, as the backend checks them."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnx
import pytest
from onnx import helper, numpy_helper
from support.validate_repo_helpers import codes, make_model, messages, onnx_bytes, onnx_config, validate

from repo_builder import onnx_io
from repo_builder.onnx_io import OnnxReadError, parse_onnx_signature, read_onnx_signature
from repo_builder.validate.records import Severity

CONFORMANCE = Path(__file__).resolve().parents[3] / "shared" / "conformance" / "triton-qa" / "L0_model_config"
ONNX_CASES = CONFORMANCE / "autofill_noplatform" / "onnx"

# Graph: INPUT0/INPUT1 int32 [batch, 16] -> OUTPUT0/OUTPUT1 int32 [batch, 16].
TWO_IN = onnx_bytes(
    [("INPUT0", "INT32", ["b", 16]), ("INPUT1", "INT32", ["b", 16])],
    [("OUTPUT0", "INT32", ["b", 16]), ("OUTPUT1", "INT32", ["b", 16])],
)
FIXED = onnx_bytes([("INPUT0", "FLOAT", [16])], [("OUTPUT0", "FLOAT", [16])])
IN0, OUT0 = ("INPUT0", "TYPE_INT32", [16]), ("OUTPUT0", "TYPE_INT32", [16])
IN1, OUT1 = ("INPUT1", "TYPE_INT32", [16]), ("OUTPUT1", "TYPE_INT32", [16])


def _model(repo: Path, config: str, graph: bytes = TWO_IN, name: str = "m") -> None:
    make_model(repo, name, config, {1: {"model.onnx": graph}})


def test_onnx_model_passes_when_config_matches_graph(repo: Path) -> None:
    _model(repo, onnx_config("m", 8, [IN0, IN1], [OUT0, OUT1]))
    report = validate(repo, strict=True)
    assert report.diagnostics == ()


@pytest.mark.parametrize("case", sorted(p.name for p in ONNX_CASES.iterdir()) if ONNX_CASES.is_dir() else [])
def test_onnx_rules_carry_triton_message_for_conformance_case(repo: Path, case: str) -> None:
    shutil.copytree(ONNX_CASES / case, repo / case, ignore=shutil.ignore_patterns("expected*"))
    # The expected line is a basic regular expression whose only escapes are \[ and \]: a literal.
    expected = (ONNX_CASES / case / "expected").read_text().strip().replace("\\[", "[").replace("\\]", "]")
    report = validate(repo)
    found = [d.message for d in report.diagnostics if d.severity == Severity.ERROR]
    assert any(expected in m for m in found), found


@pytest.mark.parametrize(
    "graph",
    [
        b"<html>404 not found</html>",
        b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        TWO_IN[: len(TWO_IN) // 2],
        b"",
    ],
)
def test_onnx_model_unreadable_flagged_when_file_is_not_onnx(repo: Path, graph: bytes) -> None:
    _model(repo, onnx_config("m", 8, [IN0, IN1], [OUT0, OUT1]), graph)
    report = validate(repo)
    assert "RB601" in codes(report, "m", Severity.ERROR)
    assert next(d.path for d in report.diagnostics if d.code == "RB601") == "m/1/model.onnx"


def test_onnx_model_unreadable_flagged_when_external_data_missing(repo: Path, tmp_path: Path) -> None:
    weights = numpy_helper.from_array(__import__("numpy").ones((256, 16), "float32"), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", 256])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["b", 16])],
        initializer=[weights],
    )
    model = helper.make_model(graph)
    folder = tmp_path / "export"
    folder.mkdir()
    onnx.save_model(
        model, folder / "model.onnx", save_as_external_data=True, location="model.onnx.data", size_threshold=0
    )
    config = onnx_config("m", 8, [("x", "TYPE_FP32", [256])], [("y", "TYPE_FP32", [16])])
    make_model(repo, "m", config, {1: {"model.onnx": (folder / "model.onnx").read_bytes()}})
    assert any("model.onnx.data" in m for m in messages(validate(repo), "RB601"))
    (repo / "m" / "1" / "model.onnx.data").write_bytes((folder / "model.onnx.data").read_bytes())
    assert "RB601" not in codes(validate(repo))


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ([IN0], "configuration expects 1 inputs, model provides 2"),
        ([IN0, IN1, ("INPUT2", "TYPE_INT32", [16])], "configuration expects 3 inputs, model provides 2"),
    ],
)
def test_onnx_input_count_flagged_with_triton_message(repo: Path, inputs: list, expected: str) -> None:
    _model(repo, onnx_config("m", 8, inputs, [OUT0, OUT1]))
    assert messages(validate(repo), "RB602") == [f"unable to load model 'm', {expected}"]


def test_onnx_input_count_flagged_when_strict_and_config_has_no_inputs(repo: Path) -> None:
    _model(repo, onnx_config("m", 8, [], [OUT0, OUT1]))
    assert messages(validate(repo, strict=True), "RB602") == [
        "unable to load model 'm', configuration expects 0 inputs, model provides 2"
    ]
    assert "RB602" not in codes(validate(repo))  # auto-complete fills the inputs in


def test_onnx_input_count_counts_sequence_controls(repo: Path) -> None:
    graph = onnx_bytes(
        [("INPUT0", "INT32", ["b", 16]), ("START", "INT32", ["b", 1])], [("OUTPUT0", "INT32", ["b", 16])]
    )
    seq = """sequence_batching { control_input [{ name: "START"
      control [{ kind: CONTROL_SEQUENCE_START int32_false_true: [0, 1] }] }] }\n"""
    _model(repo, onnx_config("m", 8, [IN0], [OUT0], extra=seq), graph)
    assert "RB602" not in codes(validate(repo))


def test_onnx_tensor_unknown_flagged_with_sorted_allowed_names(repo: Path) -> None:
    _model(
        repo,
        onnx_config(
            "m", 8, [IN0, ("INPUT_UNKNOWN", "TYPE_INT32", [16])], [OUT0, ("OUTPUT_X", "TYPE_INT32", [16])]
        ),
    )
    found = messages(validate(repo), "RB603")
    assert "unexpected inference input 'INPUT_UNKNOWN', allowed inputs are: INPUT0, INPUT1" in found
    assert "unexpected inference output 'OUTPUT_X', allowed outputs are: OUTPUT0, OUTPUT1" in found


def test_onnx_tensor_unknown_accepts_overridable_initializer_as_input(repo: Path) -> None:
    graph = onnx_bytes(
        [("x", "FLOAT", [4]), ("scale", "FLOAT", [])], [("y", "FLOAT", [4])], initializers=["scale"]
    )
    config = onnx_config(
        "m", 0, [("x", "TYPE_FP32", [4]), ("scale", "TYPE_FP32", [1])], [("y", "TYPE_FP32", [4])]
    )
    _model(
        repo,
        config.replace(
            'name: "scale" data_type: TYPE_FP32', 'name: "scale" data_type: TYPE_FP32 optional: true'
        ),
        graph,
    )
    report = validate(repo, strict=True)
    assert {"RB602", "RB603"}.isdisjoint(codes(report))


def test_onnx_dtype_mismatch_flagged_with_triton_message(repo: Path) -> None:
    _model(repo, onnx_config("m", 8, [("INPUT0", "TYPE_FP32", [16]), IN1], [OUT0, OUT1]))
    assert messages(validate(repo), "RB604") == [
        "unable to load model 'm', configuration expects datatype TYPE_FP32 for input 'INPUT0', model provides TYPE_INT32"
    ]


def test_onnx_dims_mismatch_flagged_when_batching_graph_has_fixed_first_dim(repo: Path) -> None:
    _model(
        repo, onnx_config("m", 8, [("INPUT0", "TYPE_FP32", [16])], [("OUTPUT0", "TYPE_FP32", [16])]), FIXED
    )
    found = messages(validate(repo), "RB605")
    assert any(
        "for the model to support batching the shape should have at least 1 dimension" in m for m in found
    )


def test_onnx_dims_mismatch_silent_when_non_batching_config_gives_full_shape(repo: Path) -> None:
    _model(
        repo, onnx_config("m", 0, [("INPUT0", "TYPE_FP32", [16])], [("OUTPUT0", "TYPE_FP32", [16])]), FIXED
    )
    assert validate(repo).diagnostics == ()


def test_onnx_dims_mismatch_flagged_when_non_batching_shape_differs(repo: Path) -> None:
    _model(repo, onnx_config("m", 0, [("INPUT0", "TYPE_FP32", [8])], [("OUTPUT0", "TYPE_FP32", [16])]), FIXED)
    assert messages(validate(repo), "RB605") == [
        "model 'm', tensor 'INPUT0': the model expects 1 dimensions (shape [16]) but the model configuration "
        "specifies 1 dimensions (shape [8])"
    ]


def test_onnx_dims_mismatch_outputs_compared_exactly_inputs_not(repo: Path) -> None:
    graph = onnx_bytes([("INPUT0", "FLOAT", ["b", "n"])], [("OUTPUT0", "FLOAT", ["b", "n"])])
    _model(
        repo, onnx_config("m", 8, [("INPUT0", "TYPE_FP32", [16])], [("OUTPUT0", "TYPE_FP32", [16])]), graph
    )
    found = messages(validate(repo), "RB605")
    assert len(found) == 1 and "tensor 'OUTPUT0'" in found[0]


def test_onnx_dims_mismatch_uses_reshape_when_given(repo: Path) -> None:
    graph = onnx_bytes([("INPUT0", "FLOAT", ["b", 4, 4])], [("OUTPUT0", "FLOAT", ["b", 4, 4])])
    reshape = 'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [16] reshape: { shape: [4, 4] } }]\n'
    out = 'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4, 4] }]\n'
    _model(repo, 'name: "m"\nbackend: "onnxruntime"\nmax_batch_size: 8\n' + reshape + out, graph)
    assert "RB605" not in codes(validate(repo))


def test_onnx_dims_mismatch_flagged_when_scalar_graph_tensor_has_dims_not_1(repo: Path) -> None:
    graph = onnx_bytes([("x", "FLOAT", [])], [("y", "FLOAT", [])])
    _model(repo, onnx_config("m", 0, [("x", "TYPE_FP32", [2])], [("y", "TYPE_FP32", [1])]), graph)
    found = messages(validate(repo), "RB605")
    assert found == [
        "unable to load model 'm', scalar tensor 'x', should only provide 1 in the model configuration when the "
        "model doesn't support batching. Model configuration provided: [2]."
    ]


def test_onnx_batching_unsupported_flagged_when_autofill_meets_fixed_graph(repo: Path) -> None:
    _model(repo, onnx_config("m", 4, [("INPUT0", "TYPE_FP32", [16])], []), FIXED)
    assert messages(validate(repo), "RB606") == [
        "autofill failed for model 'm': model does not support batching while non-zero max_batch_size is specified"
    ]
    assert "RB606" not in codes(validate(repo, strict=True))  # no auto-complete, no such check


def test_onnx_batching_unsupported_flagged_for_optional_input_on_batching_model(repo: Path) -> None:
    config = onnx_config("m", 8, [IN0, IN1], [OUT0, OUT1]).replace(
        'name: "INPUT1" data_type: TYPE_INT32', 'name: "INPUT1" data_type: TYPE_INT32 optional: true'
    )
    _model(repo, config)
    assert any("optional input 'INPUT1' is not supported" in m for m in messages(validate(repo), "RB606"))


def test_onnx_max_batch_size_autofilled_warned_when_outputs_left_to_autocomplete(repo: Path) -> None:
    _model(
        repo,
        onnx_config("m", 0, [("INPUT0", "TYPE_INT32", [-1, 16]), ("INPUT1", "TYPE_INT32", [-1, 16])], []),
    )
    report = validate(repo)
    assert "RB607" in codes(report, "m", Severity.WARNING)
    # With max_batch_size autofilled to 4 the inputs' full shapes now include a batch dim: Triton refuses.
    assert "RB605" in codes(report, "m", Severity.ERROR)


def test_onnx_max_batch_size_autofilled_silent_when_io_complete(repo: Path) -> None:
    _model(
        repo,
        onnx_config(
            "m",
            0,
            [("INPUT0", "TYPE_INT32", [-1, 16]), ("INPUT1", "TYPE_INT32", [-1, 16])],
            [("OUTPUT0", "TYPE_INT32", [-1, 16]), ("OUTPUT1", "TYPE_INT32", [-1, 16])],
        ),
    )
    report = validate(repo)
    assert report.diagnostics == ()


def test_parse_onnx_signature_matches_onnx_load_when_model_has_initializers(tmp_path: Path) -> None:
    data = onnx_bytes(
        [("x", "FLOAT", ["b", 3]), ("bias", "FLOAT", [])], [("y", "FLOAT", ["b", 3])], initializers=["bias"]
    )
    sig = parse_onnx_signature(data)
    model = onnx.load_from_string(data)
    assert [t.name for t in sig.inputs] == [i.name for i in model.graph.input if i.name != "bias"]
    assert [t.name for t in sig.overridable] == ["bias"]
    assert sig.inputs[0].dims == (-1, 3) and sig.inputs[0].elem_type == onnx.TensorProto.FLOAT
    assert [t.name for t in sig.outputs] == [o.name for o in model.graph.output]


def test_read_onnx_signature_reads_a_big_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    big = numpy_helper.from_array(np.zeros((1024, 1024), "float32"), "W")  # 4 MB of weights: mmap path
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", 1024])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["b", 1024])],
        initializer=[big],
    )
    path = tmp_path / "model.onnx"
    onnx.save_model(helper.make_model(graph), path)
    calls: list[Path] = []
    real = onnx_io._read
    monkeypatch.setattr(onnx_io, "_read", lambda *args: calls.append(args[0]) or real(*args))
    first = read_onnx_signature(path)
    second = read_onnx_signature(path)
    assert first == second and len(calls) == 1
    assert [t.name for t in first.inputs] == ["x"] and first.outputs[0].dims == (-1, 1024)


def test_read_onnx_signature_raises_read_error_for_missing_file(tmp_path: Path) -> None:
    with pytest.raises(OnnxReadError):
        read_onnx_signature(tmp_path / "absent.onnx")
