"""The gate again, against what a repository serves now: the TensorRT plan built on a GPU, say.

Q/DQ models can answer differently in ONNX Runtime and in TensorRT (TensorRT#4079, Model-Optimizer#869),
so the build's figure (measured with ONNX Runtime on the CPU) is not the plan's. The build keeps the float
pipeline's answers on the accuracy data beside the model step (``REFERENCE_FILE``: numbers and strings in
an ``.npz``, read without pickle); ``regate`` serves the repository as it is, sends the same data (its
digest must match the one recorded), and compares with the family's metric and the recorded threshold.
``compile-pending --accuracy-data`` runs it after building plans, and ``record_plan_gate`` keeps both
figures in the manifest; publish refuses a repository whose plan failed its gate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.fsutil import write_json_atomic
from repo_builder.gpu import detect_gpus
from repo_builder.pipelines.reference import built_ensemble, served_copy
from repo_builder.pipelines.settings import step_names
from repo_builder.precision.answers import REFERENCE_FILE, load_reference
from repo_builder.precision.gate import AccuracyMetric, Answer, measure, requests_for
from repo_builder.precision.samples import read_samples
from repo_builder.repository.manifest import MANIFEST_FILE, read_manifest
from repo_builder.triton.server import start_server

Log = Callable[[str], None]
@dataclass(frozen=True)
class PlanGate:
    ensemble: str
    model: str  # the model step
    version: str
    figures: Mapping[str, float]
    compared: int
    threshold: float
    metric: str
    passed: bool
    measured_on: str

    def to_json(self) -> dict[str, Any]:
        return {"figures": {k: round(v, 6) for k, v in self.figures.items()}, "compared": self.compared,
                "threshold": self.threshold, "metric": self.metric, "passed": self.passed, "measured_on": self.measured_on}


def _gated_version(repository: Path, ensemble: str) -> tuple[str, str, dict[str, Any]]:
    model = step_names(ensemble)["model"]
    versions = read_manifest(repository)["models"].get(model, {}).get("versions", {})
    gated = {v: e["settings"]["precision"] for v, e in versions.items()
             if isinstance(e, dict) and isinstance(e.get("settings", {}).get("precision"), dict)}
    if not gated:
        raise UserError(f"{repository / MANIFEST_FILE}: {model} was not built with a gated --precision; nothing to measure")
    version = max(gated, key=int)
    return model, version, gated[version]


def regate(repository: Path, accuracy_data: Path, *, ensemble: str | None = None, measured_on: str, log: Log,
           tritonserver: str | None = None) -> PlanGate:
    """Serve ``repository`` as it is and measure its gated model step again on ``accuracy_data``."""
    built = built_ensemble(repository, ensemble)
    metric: AccuracyMetric | None = built.family.accuracy
    if metric is None:
        raise UserError(f"build {built.family.command} declares no accuracy metric")
    model, version, record = _gated_version(repository, built.name)
    accuracy = record.get("accuracy", {})
    samples = read_samples("--accuracy-data", accuracy_data, metric.unit, int(accuracy.get("samples", 1000)))
    if samples.digest() != accuracy.get("sha256"):
        raise UserError(f"--accuracy-data {accuracy_data}: not the data {model}/{version} was gated on "
                        f"(recorded: {accuracy.get('path')}, {accuracy.get('samples')} {metric.unit}); pass that data")
    reference = repository / model / version / REFERENCE_FILE
    if not reference.is_file():
        raise UserError(f"{reference}: missing; the float answers are written by 'repo-builder build --precision'")
    float_answers = load_reference(reference, repository)
    threshold = float(accuracy.get("threshold", metric.threshold))
    log(f"{built.name}: serving {repository} to measure {model}/{version} again on {len(samples.samples)} {metric.unit}")
    with served_copy(repository, built, tritonserver) as folder, start_server(folder, mode="explicit", tritonserver=tritonserver) as server:
        server.load(built.name, timeout=600.0)
        batches, single = requests_for(metric, samples, built.max_batch_size)
        answers: list[Answer | None] = []
        for count, request in batches():
            try:
                out = server.infer(built.name, request, timeout=300.0)
                answers.extend({name: value[row] for name, value in out.items()} for row in range(count))
            except Exception:
                server.check_alive()
                for index in range(len(answers), len(answers) + count):
                    with contextlib.suppress(Exception):
                        out = server.infer(built.name, single(index), timeout=300.0)
                        answers.append({name: value[0] for name, value in out.items()})
                        continue
                    answers.append(None)
    measured = measure(metric, float_answers, answers)
    passed = measured.headline(metric) >= threshold and measured.compared > 0
    return PlanGate(built.name, model, version, measured.figures, measured.compared, threshold, metric.headline, passed, measured_on)


def record_plan_gate(repository: Path, gate: PlanGate) -> None:
    """Keep the served figure beside the build's in the manifest (``precision.served_gate``)."""
    data = read_manifest(repository)
    entry = data["models"][gate.model]["versions"][gate.version]["settings"]["precision"]
    entry["served_gate"] = gate.to_json()
    write_json_atomic(repository / MANIFEST_FILE, data, sort_keys=True)


def gated_ensembles(repository: Path) -> list[str]:
    """The ensembles whose model step a gated --precision build wrote (the manifest's records)."""
    models = read_manifest(repository)["models"]
    names = []
    for name, entry in sorted(models.items()):
        if isinstance(entry, dict) and entry.get("role") == "ensemble":
            with contextlib.suppress(UserError):
                _gated_version(repository, name)
                names.append(name)
    return names


def gpu_name() -> str:
    """This machine's GPU as nvidia-smi names it, for the record ("a GPU" when it cannot say)."""
    found = detect_gpus()
    return str(found[0].name) if found else "a GPU"
