"""Reading an ONNX file's IO into TensorSpecs, the checker, the exporter's error handling, lazy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import torch
from onnx import TensorProto, helper

from repo_builder.errors import UserError
from repo_builder.export.exporter import export_module
from repo_builder.export.onnx_reader import check_onnx, read_onnx_io


def _write_model(path: Path) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.INT32, ["batch", 4, None])
    w = helper.make_tensor_value_info("w", TensorProto.INT32, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", 2])
    init = helper.make_tensor("w", TensorProto.INT32, [4], [1, 2, 3, 4])
    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [x, w], [y], initializer=[init])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_read_onnx_io_names_dims_and_dtypes_when_reading_a_file(tmp_path: Path) -> None:
    io = read_onnx_io(_write_model(tmp_path / "m.onnx"))
    (x,) = io.inputs  # the initializer 'w' is not a real input
    (y,) = io.outputs
    assert (x.name, x.dtype, x.shape) == ("x", "int32", ("batch", 4, "x_dim2"))
    assert (y.name, y.dtype, y.triton_type, y.shape) == ("y", "float16", "TYPE_FP16", ("batch", 2))
    assert io.opset == 17


def test_read_onnx_io_gives_one_line_error_when_the_file_is_garbage(tmp_path: Path) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"\x08\xff\xff garbage")
    with pytest.raises(UserError, match="not a readable ONNX file") as info:
        read_onnx_io(path)
    assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="no such ONNX file"):
        read_onnx_io(tmp_path / "absent.onnx")


def test_check_onnx_rejects_a_model_when_a_node_reads_an_undefined_tensor(tmp_path: Path) -> None:
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["nowhere"], ["y"])], "g", [], [y])
    path = tmp_path / "broken.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(UserError, match=r"onnx\.checker rejected"):
        check_onnx(path)


class _Svd(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.svd(x)[1]


def test_export_module_names_the_operator_when_it_is_unsupported(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(
        UserError, match=r"unsupported operator: .*aten::linalg_svd.* opset version 17"
    ) as info:
        export_module(
            _Svd(),
            [torch.randn(2, 3, 3)],
            tmp_path / "svd.onnx",
            input_names=["x"],
            output_names=["s"],
            dynamic_axes={"x": {0: "batch"}},
            opset=17,
        )
    assert "\n" not in str(info.value)
    assert "Torch IR graph" not in capfd.readouterr().out  # torch's dump of the graph is kept off stdout


def test_export_module_rejects_the_opset_when_out_of_range(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--opset 9: choose an opset between 13 and"):
        export_module(
            torch.nn.Identity(),
            [torch.ones(1)],
            tmp_path / "i.onnx",
            input_names=["x"],
            output_names=["y"],
            dynamic_axes={},
            opset=9,
        )


def test_export_modules_import_no_heavy_framework_when_imported() -> None:
    code = (
        "import sys, repo_builder.export, repo_builder.cli.export, repo_builder.export.onnx_reader;"
        "heavy = [m for m in ('torch', 'torchvision', 'transformers', 'onnxruntime', 'tokenizers') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert proc.stdout.strip() == ""


def test_read_onnx_io_takes_the_default_domain_opset_when_custom_domains_come_first(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("com.example", 3), helper.make_opsetid("", 18)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    assert read_onnx_io(tmp_path / "m.onnx").opset == 18


# Modules that read more of an ONNX graph than its IO (so not through repo_builder/onnx_io.py), and why.
GRAPH_READERS = {
    "onnx_io.py": "the one ONNX IO reader",
    "compile/precision.py": "the element types of every value and initializer and the op types, not just the IO",
    "precision/convert.py": "rewrites the graph's types (float16/bfloat16), inputs and outputs among them",
    "precision/quantize.py": "the graph's non-initializer inputs, to feed calibration tensors to quantize_static",
    "precision/sensitivity.py": "adds the quantized nodes' activations as graph outputs to measure them",
    "export/ultralytics_detector.py": "the detector's own export: IO dims together with Ultralytics' metadata_props",
}


def test_only_the_onnx_io_reader_reads_graph_inputs_when_the_package_is_scanned() -> None:
    import ast

    import repo_builder

    package = Path(repo_builder.__file__).resolve().parent
    readers = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or node.attr not in ("input", "output"):
                continue
            owner = node.value  # model.graph.input, or graph.input with graph = model.graph
            if (isinstance(owner, ast.Attribute) and owner.attr == "graph") or (isinstance(owner, ast.Name) and owner.id == "graph"):
                readers.add(str(path.relative_to(package)))
    readers |= {"onnx_io.py"}  # reads the fields by number, without attribute access
    assert readers == set(GRAPH_READERS), "read ONNX inputs/outputs with repo_builder.onnx_io (or list the module here, with why)"
