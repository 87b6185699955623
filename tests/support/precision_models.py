"""Test models for the precision gate: a tiny sentence-transformers export with one layer made sensitive to int8."""

from __future__ import annotations

from pathlib import Path

import numpy as np

OUTLIER = 1000.0


def make_one_layer_sensitive(onnx_path: Path) -> str:
    """Rewrite ``onnx_path`` in place so one MatMul's input carries a constant ``OUTLIER`` in its first channel,
    taken off again after the MatMul (its row of the weight times ``OUTLIER``): the float function is
    unchanged, but one int8 scale for that input (``OUTLIER / 127``) rounds every other channel to zero.
    Returns that MatMul's name (the last one: nothing after it dilutes its error before the embedding)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(onnx_path))
    weights = {t.name: t for t in model.graph.initializer}
    node = [n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in weights and len(weights[n.input[1]].dims) == 2][-1]
    weight = numpy_helper.to_array(weights[node.input[1]])
    shift = np.zeros(weight.shape[0], dtype=np.float32)
    shift[0] = OUTLIER
    model.graph.initializer.extend([numpy_helper.from_array(shift, "sensitive_shift"),
                                    numpy_helper.from_array((-OUTLIER * weight[0, :]).astype(np.float32), "sensitive_unshift")])
    shifted, raw = f"{node.input[0]}__shifted", f"{node.output[0]}__shifted"
    nodes = list(model.graph.node)
    index = nodes.index(node)
    before = helper.make_node("Add", [node.input[0], "sensitive_shift"], [shifted], name="sensitive_shift_add")
    after = helper.make_node("Add", [raw, "sensitive_unshift"], [node.output[0]], name="sensitive_unshift_add")
    node.input[0], node.output[0] = shifted, raw
    nodes[index:index + 1] = [before, node, after]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.save(model, str(onnx_path))
    return node.name
