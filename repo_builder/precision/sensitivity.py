"""Which quantized nodes lose the most: the fallback returns those to float first.

Each quantizable node is scored by the signal-to-quantization-noise ratio (SQNR, dB) of what int8 does to
its own inputs: its activations quantized per tensor with the symmetric MinMax scale calibration fits
(the signal being each channel's variation around its mean), its weight per output channel. The activations are the float model's, on the calibration tensors, so the
score is the node's own loss, not the error piling up from the nodes before it. A node fed by a
few huge values (the input of a transformer's FFN output projection, a softmax's probabilities next to its
scores) scores lowest: one scale for the tensor leaves the rest a handful of levels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from repo_builder.precision.quantize import QUANTIZED_OPS, TensorBatches

INT8_MAX = 127.0
_SQNR_CAP = 200.0  # dB: a tensor int8 represents exactly (all zeros) is not more sensitive than that


@dataclass(frozen=True)
class NodeLoss:
    node: str
    op_type: str
    sqnr_db: float  # the lower of its activation and weight SQNR
    worst_input: str  # the input that scored it

    def reason(self) -> str:
        return f"{self.op_type} {self.node}: int8 keeps {self.sqnr_db:.1f} dB of signal in {self.worst_input}"

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "op_type": self.op_type, "sqnr_db": round(self.sqnr_db, 2), "input": self.worst_input}


def _sqnr(signal: float, noise: float) -> float:
    if noise <= 0:
        return _SQNR_CAP
    if signal <= 0:
        return 0.0
    return min(_SQNR_CAP, 10.0 * math.log10(signal / noise))


def _fake_quant(values: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    safe = np.where(np.asarray(scale) > 0, scale, 1.0)
    return np.clip(np.round(values / safe), -INT8_MAX, INT8_MAX) * safe


def _weight_sqnr(weight: np.ndarray, op_type: str) -> float:
    """Per output channel, as quantize_int8 does: axis 1 of a MatMul's weight, 0 of Conv's and Gemm's."""
    w = weight.astype(np.float64)
    axis = 1 if op_type == "MatMul" and w.ndim == 2 else 0
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    scale = np.abs(moved).max(axis=1, keepdims=True) / INT8_MAX
    return _sqnr(float((moved ** 2).sum()), float(((moved - _fake_quant(moved, scale)) ** 2).sum()))


def _channels(value: np.ndarray, conv: bool) -> np.ndarray:
    """``value`` as rows of one channel each: axis 1 of a Conv's input, the last axis of a MatMul's or Gemm's."""
    moved = np.moveaxis(value, 1 if conv and value.ndim > 2 else -1, 0)
    return moved.reshape(moved.shape[0], -1).astype(np.float64)


def _activation_noise(session: Any, batches: TensorBatches, activations: Mapping[str, bool],
                      computed: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
    """Signal and int8 noise energy of each activation (name -> whether a Conv reads it) over every batch.
    The signal is each channel's variation around its mean: a channel that only carries a large constant
    (an offset a later op takes off again) holds no information, yet sets the scale that rounds the
    others away. Two passes: the MinMax scale and channel means first, then the energies."""
    peak = dict.fromkeys(activations, 0.0)
    sums: dict[str, np.ndarray] = {}
    counts = dict.fromkeys(activations, 0)  # values seen
    totals = dict.fromkeys(activations, 0.0)
    signal = dict.fromkeys(activations, 0.0)
    noise = dict.fromkeys(activations, 0.0)

    def tensors(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feed = {i.name: batch[i.name] for i in session.get_inputs()}
        out = dict(zip(computed, session.run(list(computed), feed), strict=True)) if computed else {}
        return {name: (feed[name] if name in feed else out[name]) for name in activations if np.issubdtype(
            (feed[name] if name in feed else out[name]).dtype, np.floating)}

    varying: set[str] = set()  # the channel axis changes size between batches (a sequence axis): one mean
    for batch in batches:
        for name, value in tensors(batch).items():
            rows = _channels(value, activations[name])
            peak[name] = max(peak[name], float(np.abs(rows).max(initial=0.0)))
            if name in sums and sums[name].shape[0] != rows.shape[0]:
                varying.add(name)
            if name not in varying:
                sums[name] = sums.get(name, 0.0) + rows.sum(axis=1)
            totals[name] += float(rows.sum())
            counts[name] += rows.size
    for batch in batches:
        for name, value in tensors(batch).items():
            rows = _channels(value, activations[name])
            mean: Any = totals[name] / max(counts[name], 1)
            if name not in varying:
                mean = (sums[name] * rows.shape[0] / max(counts[name], 1))[:, None]
            signal[name] += float(((rows - mean) ** 2).sum())
            noise[name] += float(((rows - _fake_quant(rows, peak[name] / INT8_MAX)) ** 2).sum())
    return signal, noise


def rank_nodes(source: Path, batches: TensorBatches, nodes: Sequence[str] | None = None) -> tuple[NodeLoss, ...]:
    """The quantizable nodes of ``source`` (or ``nodes``), worst first."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    model = onnx.load(str(source))
    weights = {t.name: t for t in model.graph.initializer}
    chosen = [n for n in model.graph.node if n.op_type in QUANTIZED_OPS and (nodes is None or n.name in set(nodes))]
    activations = sorted({i for n in chosen for i in n.input if i and i not in weights})
    graph_inputs = {i.name for i in model.graph.input}
    present = {o.name for o in model.graph.output}
    for name in activations:
        if name not in present and name not in graph_inputs:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the tensors as the graph names them
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    readers = {name: any(n.op_type == "Conv" and name in n.input for n in chosen) for name in activations}
    signal, noise = _activation_noise(session, batches, readers, [n for n in activations if n not in graph_inputs])
    losses = []
    for node in chosen:
        scores = [(_sqnr(signal[i], noise[i]), i) for i in node.input if i in signal]
        for i in node.input[1:2]:
            if i in weights:
                scores.append((_weight_sqnr(numpy_helper.to_array(weights[i]), node.op_type), i))
        db, worst = min(scores) if scores else (_SQNR_CAP, "")
        losses.append(NodeLoss(node.name, node.op_type, db, worst))
    return tuple(sorted(losses, key=lambda loss: loss.sqnr_db))
