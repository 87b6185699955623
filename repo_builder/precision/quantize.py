"""int8 as TensorRT's explicit quantization takes it: Q/DQ nodes with symmetric scales, fitted on CPU.

ONNX Runtime's ``quantize_static`` writes the Q/DQ graph (QDQ format, int8 activations and weights, zero
points 0 as TensorRT requires, weights per output channel). Scales come from the calibration tensors by
MinMax: its calibrator keeps two numbers per tensor and batch, so memory stays bounded by the sample cap.
ONNX Runtime's own bound, ``CalibMaxIntermediateOutputs``, is not used: in 1.32 it discards every batch
collected before the cut instead of merging it (``MinMaxCalibrater.collect_data`` clears without
``compute_data``), leaving ranges from the last few batches only, or none.

Only the ops whose int8 kernels carry the speed are quantized: MatMul, Gemm and Conv.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from repo_builder.errors import UserError
from repo_builder.precision.convert import save_model

QUANTIZED_OPS = ("MatMul", "Gemm", "Conv")
BATCH_PREFIX = "batch-"


class TensorBatches:
    """Model-step input tensors, one ``.npz`` per batch in a folder: written as they arrive, read one at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.count = len(list(folder.glob(f"{BATCH_PREFIX}*.npz")))

    def add(self, tensors: Mapping[str, np.ndarray]) -> None:
        np.savez(self.folder / f"{BATCH_PREFIX}{self.count:06d}.npz", **{k: np.asarray(v) for k, v in tensors.items()})
        self.count += 1

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        for path in sorted(self.folder.glob(f"{BATCH_PREFIX}*.npz")):
            with np.load(path) as data:
                yield {name: data[name] for name in data.files}


@dataclass(frozen=True)
class Quantized:
    path: Path
    quantized_nodes: tuple[str, ...]
    float_nodes: tuple[str, ...]  # quantizable nodes kept float (the fallback's)


def quantizable_nodes(model: Any) -> tuple[str, ...]:
    """The names of the nodes ``quantize_int8`` quantizes (every MatMul, Gemm and Conv), in graph order."""
    return tuple(n.name for n in model.graph.node if n.op_type in QUANTIZED_OPS)


def name_nodes(source: Path, dest: Path) -> Path:
    """``source`` with every unnamed node given a unique name (exclusions and reports go by node name)."""
    import onnx

    model = onnx.load(str(source))
    taken = {n.name for n in model.graph.node if n.name}
    if len(taken) == len(model.graph.node):
        return source
    for index, node in enumerate(model.graph.node):
        if not node.name:
            name = f"{node.op_type}_{index}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)
    save_model(model, dest)
    return dest


def _reader(batches: TensorBatches, inputs: Sequence[str]) -> Any:
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.iterator = iter(batches)

        def get_next(self) -> dict[str, np.ndarray] | None:
            batch = next(self.iterator, None)
            return None if batch is None else {name: batch[name] for name in inputs}

    return Reader()


def quantize_int8(source: Path, dest: Path, batches: TensorBatches, exclude: Sequence[str] = ()) -> Quantized:
    """``source`` (float32, nodes named) as a Q/DQ int8 graph in ``dest``, its scales fitted on ``batches``;
    the nodes in ``exclude`` stay float."""
    import logging

    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    if batches.count == 0:
        raise UserError("int8 needs calibration tensors; none were collected from --calibration-data")
    model = onnx.load(str(source), load_external_data=False)
    nodes = quantizable_nodes(model)
    inputs = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    kept = tuple(n for n in nodes if n in set(exclude))
    dest.parent.mkdir(parents=True, exist_ok=True)
    quiet = logging.getLogger()
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # quantize_static logs advice (pre-processing) at WARNING on every call
    try:
        quantize_static(
            str(source), str(dest), _reader(batches, inputs),
            quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
            per_channel=True, op_types_to_quantize=list(QUANTIZED_OPS), nodes_to_exclude=list(kept),
            calibrate_method=CalibrationMethod.MinMax,
            extra_options={"ActivationSymmetric": True, "WeightSymmetric": True,
                           "QDQOpTypePerChannelSupportToAxis": {"MatMul": 1}},
        )
    finally:
        quiet.setLevel(level)
    return Quantized(dest, tuple(n for n in nodes if n not in set(kept)), kept)
