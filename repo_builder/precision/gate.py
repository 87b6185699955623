"""Reduced precision, gated on the task's own metric: convert or quantize the model step, serve the whole
pipeline, and compare its answers with the float pipeline's on held-out data.

Order of work (``reduce_precision``):
1. the float pipeline is served (``served.serve_pipeline``); for int8, the calibration samples go through
   the steps before the model step, and their outputs (the model step's inputs) are kept on disk;
2. the float pipeline answers every accuracy sample;
3. the reduced model (float16/bfloat16 graph, or Q/DQ int8) is served as the model step's next version and
   answers the same samples; the family's metric compares the two;
4. below the threshold, ``fallback="auto"`` returns the int8 nodes that lose the most (``sensitivity``) to
   float a few at a time, up to a share of the quantizable nodes, measuring again after each round.

The build writes nothing unless the gate passes (it runs inside the build's stage).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo_builder.errors import RefusedError, UserError
from repo_builder.precision.answers import REFERENCE_FILE, save_reference
from repo_builder.precision.convert import convert_float, emulate_bfloat16
from repo_builder.precision.quantize import TensorBatches, name_nodes, quantizable_nodes, quantize_int8
from repo_builder.precision.samples import SampleSet, check_disjoint, read_all, read_samples
from repo_builder.precision.sensitivity import rank_nodes
from repo_builder.precision.served import serve_pipeline
from repo_builder.render.rendered import RenderedModel

Log = Callable[[str], None]
Answer = Mapping[str, Any]
PRECISIONS_IN_GRAPH = ("fp16", "bf16", "int8")
FALLBACKS = ("off", "auto")
DEFAULT_FALLBACK_SHARE = 0.25
MEASURED_ON = "ONNX Runtime's CPU provider, the whole pipeline served on the embedded Triton"


@dataclass(frozen=True)
class AccuracyMetric:
    """A family's metric for the gate (``Family.accuracy``)."""

    unit: str  # what the data holds: "images" or "texts"
    request: Callable[[Sequence[Any]], Mapping[str, Any]]  # a batch of samples as clients send it -> the ensemble's inputs
    compare: Callable[[Sequence[Answer], Sequence[Answer]], Mapping[str, float]]  # float answers, reduced answers -> figures
    headline: str  # the figure the threshold applies to
    threshold: float  # its default minimum
    describe: str = ""  # the metric in a few words, for messages and docs


@dataclass(frozen=True)
class PrecisionRequest:
    """What ``build --precision`` asks for."""

    precision: str
    accuracy_data: Path
    calibration_data: Path | None = None
    min_accuracy: float | None = None  # None: the family's threshold
    fallback: str = "off"
    fallback_share: float = DEFAULT_FALLBACK_SHARE
    calibration_samples: int = 256
    accuracy_samples: int = 1000

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS_IN_GRAPH:
            raise UserError(f"--precision {self.precision}: the gate reduces to {', '.join(PRECISIONS_IN_GRAPH)}")
        if self.fallback not in FALLBACKS:
            raise UserError(f"--fallback must be one of {', '.join(FALLBACKS)}, got '{self.fallback}'")
        if not 0.0 < self.fallback_share <= 1.0:
            raise UserError(f"--fallback-limit must be a share of the quantizable nodes in (0, 1], got {self.fallback_share}")
        if self.min_accuracy is not None and not (math.isfinite(self.min_accuracy) and 0.0 <= self.min_accuracy <= 1.0):
            raise UserError(f"--min-accuracy must be between 0 and 1 (the family's headline figure), got {self.min_accuracy}")
        if self.precision == "int8" and self.calibration_data is None:
            raise UserError("--precision int8 needs --calibration-data (images or texts like those clients send); "
                            "scales are never fitted to random data")
        if self.precision != "int8" and self.calibration_data is not None:
            raise UserError(f"--calibration-data: --precision {self.precision} needs no calibration (only int8 does); drop it")
        if self.precision != "int8" and self.fallback != "off":
            raise UserError(f"--fallback {self.fallback}: the fallback returns int8 nodes to float; it applies to --precision int8 only")


@dataclass(frozen=True)
class PrecisionPlan:
    """What the build's precision stage runs: the request, and the family's metric it is gated on."""

    request: PrecisionRequest
    metric: AccuracyMetric


@dataclass(frozen=True)
class Measurement:
    figures: Mapping[str, float]
    compared: int
    refused_by_reduced: int  # samples the float pipeline answered and the reduced one refused

    def headline(self, metric: AccuracyMetric) -> float:
        return float(self.figures.get(metric.headline, 0.0))


@dataclass(frozen=True)
class GateResult:
    onnx_path: Path  # the reduced model step
    record: Mapping[str, Any] = field(default_factory=dict)  # the manifest's "precision"
    reference: Path | None = None  # the float pipeline's answers (answers.REFERENCE_FILE), for the gate run again later


def load_sets(request: PrecisionRequest, unit: str) -> tuple[SampleSet | None, SampleSet]:
    """The data sets, read and checked apart before anything is exported."""
    accuracy = read_samples("--accuracy-data", request.accuracy_data, unit, request.accuracy_samples)
    calibration = None
    if request.calibration_data is not None:
        calibration = read_samples("--calibration-data", request.calibration_data, unit, request.calibration_samples)
        check_disjoint(calibration, accuracy)
    return calibration, accuracy


def requests_for(metric: AccuracyMetric, samples: SampleSet, batch: int) -> tuple[Callable[[], Any], Callable[[int], Any]]:
    def batches() -> Any:
        for chunk in samples.batches(batch):
            yield len(chunk), metric.request(read_all(chunk))

    def single(index: int) -> Any:
        return metric.request([samples.samples[index].read()])

    return batches, single


def measure(metric: AccuracyMetric, float_answers: Sequence[Answer | None], reduced: Sequence[Answer | None]) -> Measurement:
    pairs = [(a, b) for a, b in zip(float_answers, reduced, strict=True) if a is not None]
    refused = sum(1 for _, b in pairs if b is None)
    kept = [(a, b) for a, b in pairs if b is not None]
    figures = dict(metric.compare([a for a, _ in kept], [b for _, b in kept])) if kept else {metric.headline: 0.0}
    if refused:
        # A sample the reduced pipeline refuses is a wrong answer: it counts against the headline.
        figures[metric.headline] = figures.get(metric.headline, 0.0) * len(kept) / len(pairs)
    return Measurement(figures, len(pairs), refused)


def _say(metric: AccuracyMetric, measured: Measurement) -> str:
    rest = ", ".join(f"{k} {v:.4f}" for k, v in measured.figures.items() if k != metric.headline)
    return f"{metric.headline} {measured.headline(metric):.4f}" + (f" ({rest})" if rest else "")


def reduce_precision(
    float_onnx: Path,
    request: PrecisionRequest,
    metric: AccuracyMetric,
    render: Callable[[Path], tuple[RenderedModel, ...]],
    work: Path,
    max_batch_size: int,
    log: Log,
) -> GateResult:
    """The gated reduced-precision model step for ``float_onnx``; ``render(onnx)`` renders the servable
    pipeline around an ONNX file. Raises ``RefusedError`` (nothing written) when the gate cannot pass."""
    calibration, accuracy = load_sets(request, metric.unit)
    threshold = metric.threshold if request.min_accuracy is None else request.min_accuracy
    work.mkdir(parents=True, exist_ok=True)
    models = render(float_onnx)
    with serve_pipeline(work / "served", models, max_batch_size, log) as served:
        batches, single = requests_for(metric, accuracy, served.max_batch_size)
        log(f"precision: the float pipeline answers {len(accuracy.samples)} accuracy {metric.unit} ({accuracy.path})")
        float_answers = served.answers(batches(), single)
        if not any(a is not None for a in float_answers):
            raise UserError(f"--accuracy-data {accuracy.path}: the float pipeline refused every sample; pass {metric.unit} it answers")
        reference = save_reference(work / REFERENCE_FILE, float_answers)
        if request.precision == "int8":
            assert calibration is not None  # PrecisionRequest requires it
            result = _int8(float_onnx, request, metric, served, calibration, accuracy, float_answers, threshold, work, log)
        else:
            result = _float_type(float_onnx, request, metric, served, accuracy, float_answers, threshold, work, log)
    record = {**result.record, "accuracy": {**accuracy.to_json(), **dict(result.record.get("accuracy", {}))},
              "calibration": calibration.to_json() if calibration is not None else None}
    return GateResult(result.onnx_path, record, reference)


def _gate_record(metric: AccuracyMetric, threshold: float, measured: Measurement, passed: bool) -> dict[str, Any]:
    return {"metric": metric.headline, "threshold": threshold, "figures": {k: round(v, 6) for k, v in measured.figures.items()},
            "compared": measured.compared, "refused_by_reduced": measured.refused_by_reduced, "passed": passed,
            "measured_on": MEASURED_ON}


def _refuse(request: PrecisionRequest, metric: AccuracyMetric, measured: Measurement, threshold: float, tail: str) -> RefusedError:
    return RefusedError(
        f"--precision {request.precision}: {_say(metric, measured)} against the float pipeline on {measured.compared} "
        f"accuracy {metric.unit}, below --min-accuracy {threshold:g}; nothing was written. {tail}"
    )


def _float_type(float_onnx: Path, request: PrecisionRequest, metric: AccuracyMetric, served: Any, accuracy_set: SampleSet,
                float_answers: Sequence[Answer | None], threshold: float, work: Path, log: Log) -> GateResult:
    converted = convert_float(float_onnx, work / f"model.{request.precision}.onnx", request.precision)
    log(f"precision: {request.precision} graph: {converted.reduced_nodes} nodes in {request.precision}, "
        f"{converted.float_nodes} kept float32 ({', '.join(converted.kept_ops) or 'none'})")
    measured_path = converted.path
    if request.precision == "bf16":  # no bfloat16 MatMul on ONNX Runtime's CPU provider: measure its emulation
        measured_path = emulate_bfloat16(converted.path, work / "model.bf16-emulated.onnx")
    served.candidate(measured_path)
    batches, single = requests_for(metric, accuracy_set, served.max_batch_size)
    measured = measure(metric, float_answers, served.answers(batches(), single))
    passed = measured.headline(metric) >= threshold
    log(f"precision: {request.precision} pipeline vs float: {_say(metric, measured)} (threshold {threshold:g})")
    if not passed:
        raise _refuse(request, metric, measured, threshold, "Keep --precision fp32, or lower --min-accuracy if that is acceptable.")
    accuracy = _gate_record(metric, threshold, measured, passed)
    if request.precision == "bf16":
        accuracy["measured_on"] += "; bfloat16 emulated (float32 arithmetic, every bfloat16 tensor rounded where produced)"
    return GateResult(converted.path, {"precision": request.precision, "conversion": converted.to_json(), "accuracy": accuracy})


def _int8(float_onnx: Path, request: PrecisionRequest, metric: AccuracyMetric, served: Any, calibration: SampleSet,
          accuracy_set: SampleSet, float_answers: Sequence[Answer | None], threshold: float, work: Path, log: Log) -> GateResult:
    import onnx


    source = name_nodes(float_onnx, work / "model.named.onnx")
    tensors = TensorBatches(work / "calibration")
    log(f"precision: {len(calibration.samples)} calibration {metric.unit} through the served preprocessing ({calibration.path})")
    for chunk in calibration.batches(served.max_batch_size):
        try:
            tensors.add(served.model_inputs(metric.request(read_all(chunk))))
        except Exception as exc:
            served.server.check_alive()
            raise UserError(f"--calibration-data {calibration.path}: the served preprocessing refused {chunk[0].source} "
                            f"or its batch ({str(exc).splitlines()[0][:200]}); pass {metric.unit} clients would send") from None
    nodes = quantizable_nodes(onnx.load(str(source), load_external_data=False))
    if not nodes:
        raise UserError("--precision int8: the model has no MatMul, Gemm or Conv to quantize; keep --precision fp32")
    ranked: tuple[Any, ...] = ()
    bound = max(1, int(len(nodes) * request.fallback_share)) if request.fallback == "auto" else 0
    step = max(1, math.ceil(bound / 4))
    kept: list[str] = []
    rounds: list[dict[str, Any]] = []
    while True:
        candidate = quantize_int8(source, work / f"model.int8.{len(rounds)}.onnx", tensors, kept)
        served.candidate(candidate.path)
        batches, single = requests_for(metric, accuracy_set, served.max_batch_size)
        measured = measure(metric, float_answers, served.answers(batches(), single))
        passed = measured.headline(metric) >= threshold
        rounds.append({"float_nodes": len(kept), "figures": {k: round(v, 6) for k, v in measured.figures.items()}, "passed": passed})
        log(f"precision: int8 ({len(candidate.quantized_nodes)} of {len(nodes)} nodes quantized) vs float: "
            f"{_say(metric, measured)} (threshold {threshold:g})")
        if passed or len(kept) >= bound:
            break
        if not ranked:
            log(f"precision: ranking the {len(nodes)} quantizable nodes by what int8 loses in them (calibration tensors)")
            ranked = rank_nodes(source, tensors, nodes)
        kept = [loss.node for loss in ranked[:min(bound, len(kept) + step)]]
    losses = {loss.node: loss for loss in ranked}
    if not passed:
        tail = ("Pass --fallback auto to return the nodes int8 hurts most to float, or keep --precision fp32."
                if request.fallback == "off" else
                f"The fallback kept {len(kept)} of {len(nodes)} nodes float (its limit, --fallback-limit {request.fallback_share:g}); "
                "raise the limit, add calibration data, or keep --precision fp32.")
        raise _refuse(request, metric, measured, threshold, tail)
    record = {
        "precision": "int8",
        "quantization": {"format": "QDQ", "scheme": "int8 symmetric (zero points 0), weights per channel, MinMax",
                         "ops": ["MatMul", "Gemm", "Conv"], "quantized_nodes": len(candidate.quantized_nodes),
                         "quantizable_nodes": len(nodes)},
        "fallback": {"mode": request.fallback, "limit": bound, "rounds": rounds,
                     "float_nodes": [{**losses[n].to_json(), "why": losses[n].reason()} for n in kept]},
        "accuracy": _gate_record(metric, threshold, measured, passed),
    }
    return GateResult(candidate.path, record)


def describe(record: Mapping[str, Any]) -> str:
    """One line for a recorded gate: what was reduced, and the measured figure against its threshold."""
    accuracy = record.get("accuracy") or {}
    figures = accuracy.get("figures") or {}
    metric = accuracy.get("metric", "")
    text = f"{record.get('precision')}: {metric} {figures.get(metric, float('nan')):.4f} vs fp32 on {accuracy.get('compared')} " \
           f"{accuracy.get('unit', 'samples')} (gate >= {accuracy.get('threshold')})"
    kept = (record.get("fallback") or {}).get("float_nodes") or []
    return text + (f", {len(kept)} nodes kept float" if kept else "")


def recorded_precision(manifest: Mapping[str, Any], ensemble: str) -> str:
    """``describe`` of the gate recorded for ``ensemble``'s model step in a manifest; "fp32" when none."""
    models = manifest.get("models") if isinstance(manifest.get("models"), dict) else {}
    entry = models.get(f"{ensemble}_model") if isinstance(models, dict) else None
    versions = entry.get("versions") if isinstance(entry, dict) else None
    if not isinstance(versions, dict) or not versions:
        return "fp32"
    latest = versions[max(versions, key=lambda v: int(v) if str(v).isdigit() else -1)]
    record = latest.get("settings", {}).get("precision") if isinstance(latest, dict) else None
    return describe(record) if isinstance(record, dict) else "fp32"
