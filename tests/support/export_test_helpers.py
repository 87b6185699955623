"""Reading an ONNX file's IO with plain `onnx`, independent of the code under test."""

from __future__ import annotations

from pathlib import Path

import onnx


def graph_io(path: Path) -> dict[str, dict[str, tuple[str, list[int | str]]]]:
    """{"inputs"|"outputs": {name: (ONNX element type name, [dim_value or dim_param, ...])}} in graph order."""
    model = onnx.load(str(path), load_external_data=False)
    initializers = {i.name for i in model.graph.initializer}

    def describe(values: list[onnx.ValueInfoProto]) -> dict[str, tuple[str, list[int | str]]]:
        out: dict[str, tuple[str, list[int | str]]] = {}
        for v in values:
            if v.name in initializers:
                continue
            t = v.type.tensor_type
            dims = [d.dim_param if d.dim_param else d.dim_value for d in t.shape.dim]
            out[v.name] = (onnx.TensorProto.DataType.Name(t.elem_type), dims)
        return out

    return {"inputs": describe(list(model.graph.input)), "outputs": describe(list(model.graph.output))}
