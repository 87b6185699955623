"""How a requested precision becomes a TensorRT build, for TensorRT 10 and 11: decided in the graph.

TensorRT 11 builds strongly typed networks only: every tensor keeps the type the ONNX gives it, there are
no precision flags, and trtexec dropped ``--fp16``/``--int8``/``--bf16``/``--best``. So precision is written
into the ONNX: a float16/bfloat16 graph (``precision.convert``), or Q/DQ nodes for int8
(``precision.quantize``, calibrated and gated by ``build --precision int8``). TensorRT 10 builds such a graph
strongly typed too, the same plan on both majors. TensorRT 10's builder flags (FP16, BF16, INT8 on an fp32
graph, TensorRT picking per layer) remain, on request only (``precision_flags``; recipes written before
precision moved into the graph ask for them). (NVIDIA's TensorRT 10.x -> 11.x migration guide; on 11 the
STRONGLY_TYPED creation flag and trtexec's ``--stronglyTyped`` are accepted but no longer needed.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from repo_builder.errors import UserError

_FLAGS_TRT10 = {"fp32": (), "fp16": ("FP16",), "bf16": ("BF16",), "int8": ("INT8", "FP16")}
_ONNX_TYPE = {"fp16": "FLOAT16", "bf16": "BFLOAT16"}


@dataclass(frozen=True)
class OnnxFacts:
    """What the precision choice depends on: the float types the graph computes in, and Q/DQ nodes."""

    float_types: frozenset[str]  # ONNX type names of initializers and typed values, e.g. {"FLOAT"}
    has_qdq: bool


@dataclass(frozen=True)
class PrecisionChoice:
    precision: str
    tensorrt_major: int
    strongly_typed: bool
    flags: tuple[str, ...]  # tensorrt.BuilderFlag member names (TensorRT 10 only)
    notes: tuple[str, ...]  # what was done, said to the user and kept in plan.json


def read_onnx_facts(onnx_path: Path) -> OnnxFacts:
    """Read types and op types from the graph only (external weights are not loaded)."""
    import onnx

    try:
        model = onnx.load(str(onnx_path), load_external_data=False)
    except Exception as exc:
        raise UserError(f"{onnx_path}: not a readable ONNX model ({exc})") from None
    graph = model.graph
    names = onnx.TensorProto.DataType.Name
    types = {names(t.data_type) for t in graph.initializer}
    for vi in (*graph.value_info, *graph.input, *graph.output):
        if vi.type.HasField("tensor_type"):
            types.add(names(vi.type.tensor_type.elem_type))
    floats = frozenset(t for t in types if t in ("FLOAT", "FLOAT16", "BFLOAT16", "DOUBLE"))
    qdq = any(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in graph.node)
    return OnnxFacts(floats, qdq)


def carries(precision: str, facts: OnnxFacts) -> bool:
    """Whether the graph itself computes in ``precision`` (fp32 always does)."""
    if precision == "int8":
        return facts.has_qdq
    return precision == "fp32" or _ONNX_TYPE[precision] in facts.float_types


def choose_precision(precision: str, tensorrt_major: int, facts: OnnxFacts, *, flags: bool = False) -> PrecisionChoice:
    """Decide strong typing (or, on request with TensorRT 10, builder flags), or refuse with what to do instead."""
    if precision == "int8" and not facts.has_qdq:
        raise UserError(
            "--precision int8 needs an ONNX with QuantizeLinear/DequantizeLinear nodes (explicit quantization): "
            "'repo-builder build ... --precision int8 --calibration-data DIR --accuracy-data DIR' calibrates and gates one, "
            "or quantize it with another tool (NVIDIA ModelOpt), or pick fp16"
        )
    if tensorrt_major <= 10 and (flags or precision == "fp32"):
        flag_names = _FLAGS_TRT10[precision]
        if precision == "fp32":
            note = f"TensorRT {tensorrt_major}: fp32, no reduced-precision builder flags"
        elif precision == "int8":
            note = f"TensorRT {tensorrt_major}: builder flags INT8+FP16 (on request); Q/DQ nodes place the int8 layers"
        else:
            note = f"TensorRT {tensorrt_major}: builder flag {flag_names[0]} on request (TensorRT picks {precision} per layer where faster)"
        return PrecisionChoice(precision, tensorrt_major, False, flag_names, (note,))
    base = f"TensorRT {tensorrt_major}: strongly typed network, tensor types follow the ONNX"
    if flags and precision != "fp32":
        base += f" (TensorRT {tensorrt_major} has no precision flags: the flags asked for do not apply)"
    if precision in _ONNX_TYPE:
        wanted = _ONNX_TYPE[precision]
        if wanted not in facts.float_types:
            raise UserError(
                f"--precision {precision} with TensorRT {tensorrt_major}: networks are strongly typed and this ONNX "
                f"has no {wanted} tensors (it computes in {', '.join(sorted(facts.float_types)) or 'no float type'}); "
                f"'repo-builder compile --precision {precision}' converts it, 'repo-builder build --precision {precision} "
                f"--accuracy-data DIR' converts and gates it"
                + (", or pass --precision-flags for TensorRT 10's builder flags" if tensorrt_major <= 10 else "")
                + ", or pass --precision fp32"
            )
        return PrecisionChoice(precision, tensorrt_major, True, (), (f"{base} ({wanted} from the model itself)",))
    if precision == "int8":
        return PrecisionChoice(precision, tensorrt_major, True, (), (f"{base}; Q/DQ nodes set the int8 layers",))
    return PrecisionChoice(precision, tensorrt_major, True, (), (base,))
