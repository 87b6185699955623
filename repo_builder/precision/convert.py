"""float16 and bfloat16 graphs from a float32 ONNX, for TensorRT's strongly typed builds (10 and 11).

TensorRT 11 has no precision flags: every tensor keeps the type the ONNX gives it. So the conversion is
the precision decision, made here once for every runtime. The converter is ONNX Runtime's own
(``onnxruntime.transformers.float16``, shipped in the onnxruntime wheel), with the model's inputs and
outputs kept float32 (clients and the other steps keep their types) and the numerically sensitive ops
kept float32: reductions, whose sums overflow float16 (a ReduceL2 over 384 values of 20 is already past
65504), LayerNormalization (its variance), and exponentials and powers.

bfloat16 has float32's range, so it overflows nothing, but ONNX Runtime's CPU provider has no bfloat16
MatMul: the accuracy gate measures an emulation (``emulate_bfloat16``), float32 arithmetic with every
tensor the bfloat16 graph holds rounded to bfloat16 where it is produced, which is what storage in
bfloat16 does to the values; TensorRT's kernels accumulate in float32 as the emulation does.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from repo_builder.compile.precision import carries, read_onnx_facts
from repo_builder.errors import UserError

# Kept float32 in both reduced float types (besides ONNX Runtime's own block list of ops with no float16 kernels).
SENSITIVE_OPS = ("LayerNormalization", "ReduceSum", "ReduceMean", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp",
                 "Pow", "Exp", "Log")
_EXTERNAL_OVER = 1_800_000_000  # bytes: past this, weights are saved beside the graph (protobuf's 2 GiB limit)


@dataclass(frozen=True)
class Converted:
    path: Path
    precision: str
    reduced_nodes: int  # nodes computing in the reduced type
    float_nodes: int  # compute nodes kept float32 (casts, shape ops and Constants not counted)
    kept_ops: tuple[str, ...]  # op types kept float32 that the graph holds

    def to_json(self) -> dict[str, object]:
        return {"precision": self.precision, "reduced_nodes": self.reduced_nodes, "float_nodes": self.float_nodes,
                "kept_float_ops": list(self.kept_ops)}


def _load(source: Path) -> Any:
    import onnx

    try:
        return onnx.load(str(source))
    except Exception as exc:
        raise UserError(f"{source}: not a readable ONNX model ({exc})") from None


def save_model(model: Any, dest: Path) -> None:
    import onnx

    dest.parent.mkdir(parents=True, exist_ok=True)
    if model.ByteSize() > _EXTERNAL_OVER:
        onnx.save(model, str(dest), save_as_external_data=True, location=dest.name + ".data")
    else:
        onnx.save(model, str(dest))


def _block_list() -> list[str]:
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST

    return [*DEFAULT_OP_BLOCK_LIST, *SENSITIVE_OPS]


def _float16(model: Any) -> Any:
    from onnxruntime.transformers.float16 import convert_float_to_float16

    return convert_float_to_float16(model, keep_io_types=True, op_block_list=_block_list())


def _bf16_bits(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, rounded to nearest even (as a float32 -> bfloat16 Cast rounds)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(values)
    out = rounded.astype(np.uint16)
    out[nan] = 0x7FC0
    return out


def _float_values(model: Any) -> dict[str, np.ndarray]:
    """The float32 initializers and Constant outputs of the original graph, by name."""
    from onnx import numpy_helper

    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if t.data_type == 1}
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type == 1:
                    values[node.output[0]] = numpy_helper.to_array(attr.t)
    return values


def _retype_bfloat16(converted: Any, original: Any) -> None:
    """The float16 graph's structure with bfloat16 types, its values from the float32 original (no detour
    through float16's range)."""
    from onnx import TensorProto

    values = _float_values(original)

    def retype(tensor: Any) -> None:
        if tensor.data_type != TensorProto.FLOAT16:
            return
        source = values.get(tensor.name)
        if source is None:
            source = np.frombuffer(tensor.raw_data, dtype=np.float16).astype(np.float32) if tensor.raw_data else \
                np.asarray(tensor.int32_data, dtype=np.uint16).view(np.float16).astype(np.float32)
        tensor.ClearField("int32_data")
        tensor.data_type = TensorProto.BFLOAT16
        tensor.raw_data = _bf16_bits(source.reshape(-1)).tobytes()

    for tensor in converted.graph.initializer:
        retype(tensor)
    for node in converted.graph.node:
        for attr in node.attribute:
            if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.FLOAT16:
                attr.i = TensorProto.BFLOAT16
            if attr.name == "value" and attr.t.data_type == TensorProto.FLOAT16:
                if not attr.t.name and node.output:
                    attr.t.name = node.output[0]
                retype(attr.t)
    for info in (*converted.graph.value_info, *converted.graph.input, *converted.graph.output):
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type == TensorProto.FLOAT16:
            info.type.tensor_type.elem_type = TensorProto.BFLOAT16


_LAYOUT_OPS = {"Cast", "Constant", "Shape", "Reshape", "Unsqueeze", "Squeeze", "Concat", "Gather", "Slice", "Transpose",
               "Identity", "Expand", "ConstantOfShape", "Range", "Flatten"}


def _count(model: Any, reduced_type: int) -> tuple[int, int, tuple[str, ...]]:
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in (*inferred.graph.value_info, *inferred.graph.output)}
    reduced = kept = 0
    kept_ops: Counter[str] = Counter()
    for node in model.graph.node:
        if node.op_type in _LAYOUT_OPS or not node.output:
            continue
        kind = types.get(node.output[0])
        if kind == reduced_type:
            reduced += 1
        elif kind == 1:
            kept += 1
            kept_ops[node.op_type] += 1
    return reduced, kept, tuple(sorted(kept_ops))


def convert_float(source: Path, dest: Path, precision: str) -> Converted:
    """``source`` (float32) as a ``precision`` (fp16, bf16) graph in ``dest``."""
    from onnx import TensorProto

    if precision not in ("fp16", "bf16"):
        raise ValueError(f"convert_float converts to fp16 or bf16, not {precision}")
    original = _load(source)
    converted = _float16(original)
    wanted = TensorProto.FLOAT16
    if precision == "bf16":
        _retype_bfloat16(converted, original)
        wanted = TensorProto.BFLOAT16
    save_model(converted, dest)
    reduced, kept, ops = _count(converted, wanted)
    if reduced == 0:
        raise UserError(f"{source}: no node of the model computes in {precision} after conversion "
                        f"(every op is one kept float32: {', '.join(ops) or 'none'}); keep --precision fp32")
    return Converted(dest, precision, reduced, kept, ops)


def emulate_bfloat16(bf16_path: Path, dest: Path) -> Path:
    """A float32 graph computing as ``bf16_path`` stores values: every bfloat16 tensor becomes float32 and is
    rounded to bfloat16 where it is produced (Cast to bfloat16 and back, which ONNX Runtime's CPU provider has)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = _load(bf16_path)
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in (*inferred.graph.value_info, *inferred.graph.output)}
    graph = model.graph
    for tensor in graph.initializer:
        if tensor.data_type == TensorProto.BFLOAT16:
            bits = np.frombuffer(tensor.raw_data, dtype=np.uint16).astype(np.uint32) << 16
            tensor.CopyFrom(numpy_helper.from_array(bits.view(np.float32).reshape(tuple(tensor.dims)), tensor.name))
    nodes = []
    for node in graph.node:
        for attr in node.attribute:
            if node.op_type == "Cast" and attr.name == "to" and attr.i == TensorProto.BFLOAT16:
                attr.i = TensorProto.FLOAT
            if attr.name == "value" and attr.t.data_type == TensorProto.BFLOAT16:
                bits = np.frombuffer(attr.t.raw_data, dtype=np.uint16).astype(np.uint32) << 16
                attr.t.CopyFrom(numpy_helper.from_array(bits.view(np.float32).reshape(tuple(attr.t.dims)), attr.t.name))
        rounded = [o for o in node.output if types.get(o) == TensorProto.BFLOAT16 and node.op_type not in ("Constant",)]
        renamed = {o: f"{o}__bf16_unrounded" for o in rounded}
        for index, name in enumerate(node.output):
            if name in renamed:
                node.output[index] = renamed[name]
        nodes.append(node)
        for name in rounded:
            nodes.append(helper.make_node("Cast", [renamed[name]], [f"{name}__bf16"], to=TensorProto.BFLOAT16))
            nodes.append(helper.make_node("Cast", [f"{name}__bf16"], [name], to=TensorProto.FLOAT))
    del graph.node[:]
    graph.node.extend(nodes)
    for info in (*graph.value_info, *graph.input, *graph.output):
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type == TensorProto.BFLOAT16:
            info.type.tensor_type.elem_type = TensorProto.FLOAT
    save_model(model, dest)
    return dest


def graph_for_precision(onnx_path: Path, precision: str, folder: Path, *, flags: bool = False) -> tuple[Path, str]:
    """The ONNX to build for ``precision``: ``onnx_path`` when it already carries it (or flags were asked
    for), else a float16/bfloat16 conversion written into ``folder`` (ungated: ``compile`` has no pipeline to
    measure; ``build --precision`` gates it). int8 is never made here: it needs calibration data."""
    facts = read_onnx_facts(onnx_path)
    if flags or precision in ("fp32", "int8") or carries(precision, facts):
        return onnx_path, ""
    converted = convert_float(onnx_path, folder / f"{onnx_path.stem}.{precision}.onnx", precision)
    return converted.path, (f"converted to {precision} in the graph ({converted.reduced_nodes} nodes in {precision}, "
                            f"{converted.float_nodes} kept float32: {', '.join(converted.kept_ops) or 'none'}); "
                            "not gated: 'repo-builder build --precision' measures accuracy through the pipeline")
