"""What every classification pipeline shares: settings, step names, the model step per runtime, the
top-k postprocessing step and the ensemble that wires them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.render import context as ctx
from repo_builder.render.render import render_config, render_source
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import Signature, TensorSpec

RUNTIMES = ("tensorrt", "onnxruntime", "python")
ENSEMBLE_PLACEHOLDER = "placeholder.txt"
# Object stores (S3, GCS) have no folders, only keys: an empty version folder vanishes on upload and
# Triton then refuses the ensemble ("at least one version must be available").
PLACEHOLDER_TEXT = (
    b"An ensemble has no model file. This file keeps its version folder when the repository is copied to an\n"
    b"object store (S3, GCS, Azure), which drops empty folders; Triton ignores it.\n"
)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class PipelineSettings:
    name: str  # the ensemble's name; members are <name>_preprocess, <name>_model, <name>_postprocess
    runtime: str  # resolved: tensorrt | onnxruntime | python
    max_batch_size: int = 8
    top_k: int = 5
    max_queue_delay_us: int = 100
    instance_count: int = 1  # model-step instances (issue 15: derived from the cores when the CLI is not told)
    intra_op_threads: int = 0  # model-step ONNX Runtime intra-op threads per instance; 0 = cores // instances
    draft_margin: int = 2  # JPEG draft decoding keeps at least this many source pixels per output pixel

    def __post_init__(self) -> None:
        if not _NAME.match(self.name) or len(self.name) > 200:
            raise UserError(f"--name '{self.name}': use letters, digits, '_', '-' or '.', not starting with '.' or '-'")
        if self.runtime not in RUNTIMES:
            raise UserError(f"--runtime '{self.runtime}': expected one of {', '.join(RUNTIMES)}")
        if self.max_batch_size < 1:
            raise UserError(f"--max-batch-size must be >= 1, got {self.max_batch_size}")
        if self.top_k < 1:
            raise UserError(f"--top-k must be >= 1, got {self.top_k}")


@dataclass(frozen=True)
class ModelSource:
    """The file Triton runs for the model step and its signature (a plan's own signature for TensorRT)."""

    signature: Signature
    files: Mapping[str, Path | bytes]  # version-folder name -> file (model.onnx, model.plan, plan.json ...)
    default_model_filename: str = "model.onnx"
    cc_model_filenames: Mapping[str, str] = field(default_factory=dict)


def step_names(name: str) -> dict[str, str]:
    """role -> model name; the ensemble carries the user's name since clients call it."""
    return {
        "preprocess": f"{name}_preprocess",
        "model": f"{name}_model",
        "postprocess": f"{name}_postprocess",
        "ensemble": name,
    }


def render_model_step(
    env: Any, source: ModelSource, settings: PipelineSettings, version: int, origin: str
) -> RenderedModel:
    """The model itself, for the chosen runtime."""
    name = step_names(settings.name)["model"]
    sig = source.signature
    ctx.require_batch_axis(sig, origin)
    common = {
        "inputs": [ctx.signature_tensor(t, sig.batch_axis) for t in sig.inputs],
        "outputs": [ctx.signature_tensor(t, sig.batch_axis) for t in sig.outputs],
        "max_batch_size": settings.max_batch_size,
        "max_queue_delay_us": settings.max_queue_delay_us,
        "instance_count": settings.instance_count,
    }
    files: dict[str, Path | bytes] = dict(source.files)
    if settings.runtime == "python":
        config = render_config(
            env,
            "python",
            ctx.config_context(
                name, kind="KIND_CPU", comment="The model: ONNX Runtime (CPU) inside the Python backend.", **common
            ),
        )
        files["model.py"] = render_source(env, "model/onnx_python_model.py.j2", ctx.onnx_python_model_context(name, sig)).encode()
    elif settings.runtime == "onnxruntime":
        config = render_config(
            env,
            "onnxruntime_onnx",
            ctx.config_context(name, kind="KIND_CPU", comment="The model: Triton's ONNX Runtime backend.", **common),
        )
    else:
        config = render_config(
            env,
            "tensorrt_plan",
            ctx.config_context(
                name,
                kind="KIND_GPU",
                comment="The model: a TensorRT plan, specific to a GPU's compute capability and TensorRT version.",
                default_model_filename=source.default_model_filename,
                cc_model_filenames=dict(source.cc_model_filenames),
                **common,
            ),
        )
    return RenderedModel(name=name, role="model", version=version, config_text=config, files=files)


def read_labels(path: Path, num_classes: int, origin: str) -> tuple[str, ...]:
    """One label per line, as many as the model has classes."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such labels file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the labels file ({exc})") from None
    labels = tuple(line.rstrip("\r") for line in text.split("\n"))
    if labels and labels[-1] == "":
        labels = labels[:-1]
    if len(labels) != num_classes:
        raise UserError(f"{path}: {len(labels)} labels, but {origin} has {num_classes} classes; write one label per line")
    return labels


def python_step_config(
    env: Any,
    name: str,
    settings: PipelineSettings,
    *,
    inputs: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
    comment: str,
) -> str:
    """config.pbtxt of a Python-backend pre/post step: CPU instances, batching as the pipeline's settings say."""
    context = ctx.config_context(
        name,
        inputs=inputs,
        outputs=outputs,
        max_batch_size=settings.max_batch_size,
        max_queue_delay_us=settings.max_queue_delay_us,
        kind="KIND_CPU",
        instance_count=settings.instance_count,
        comment=comment,
    )
    return render_config(env, "python", context)


def preprocess_metadata(onnx_signature: Signature, origin: str, records: str) -> Mapping[str, Any]:
    """The ``preprocess`` block export recorded in signature.json (``records``: what it holds, for the error)."""
    preprocess = onnx_signature.metadata.get("preprocess")
    if not isinstance(preprocess, dict):
        raise UserError(f"{origin}: metadata.preprocess is missing; re-run 'repo-builder export' to record the {records}")
    return preprocess


def classifier_logits(signature: Signature, labels: Sequence[str], origin: str) -> TensorSpec:
    """The logits output, with exactly one label per class."""
    logits = ctx.single_logits_output(signature, origin)
    num_classes = logits.triton_dims(signature.batch_axis)[0]
    if len(labels) != num_classes:
        raise UserError(f"{origin}: {len(labels)} labels for {num_classes} classes; pass --labels FILE with one label per line")
    return logits


def render_preprocess_step(
    env: Any,
    settings: PipelineSettings,
    version: int,
    *,
    pipeline_input: str,
    outputs: Sequence[Mapping[str, Any]],
    comment: str,
    files: Mapping[str, Path | bytes],
) -> RenderedModel:
    """The Python step that turns the pipeline's one string input into the model's inputs."""
    name = step_names(settings.name)["preprocess"]
    config = python_step_config(
        env, name, settings, inputs=[ctx.tensor_context(pipeline_input, "object", [1])], outputs=outputs, comment=comment
    )
    return RenderedModel(name, "preprocess", version, config, dict(files))


def render_classification_pipeline(
    env: Any,
    source: ModelSource,
    settings: PipelineSettings,
    versions: Mapping[str, int],
    origin: str,
    *,
    preprocess: RenderedModel,
    pipeline_input: str,
    model_inputs: Sequence[str],
    logits: TensorSpec,
    labels: Sequence[str],
    comment: str,
) -> tuple[RenderedModel, ...]:
    """preprocess -> model -> top-k postprocess, and the ensemble clients call (``comment`` heads its config)."""
    names = step_names(settings.name)
    model = render_model_step(env, source, settings, versions[names["model"]], origin)
    post = render_postprocess_step(env, logits.dtype, labels, settings, versions[names["postprocess"]], origin)
    ensemble = render_ensemble(
        env,
        settings=settings,
        version=versions[names["ensemble"]],
        inputs=[ctx.tensor_context(pipeline_input, "object", [1])],
        num_classes=len(labels),
        members=(preprocess, model, post),
        steps=classification_steps(names, pipeline_input, model_inputs, logits.name),
        comment=comment,
    )
    return preprocess, model, post, ensemble


def render_postprocess_step(
    env: Any, logits_dtype: str, labels: Sequence[str], settings: PipelineSettings, version: int, origin: str
) -> RenderedModel:
    names = step_names(settings.name)
    num_classes = len(labels)
    if any("\n" in label or "\r" in label for label in labels):
        raise UserError(f"{origin}: a label contains a line break")
    _, outputs = ctx.classification_outputs(settings.top_k, num_classes)
    config = python_step_config(
        env,
        names["postprocess"],
        settings,
        inputs=[ctx.tensor_context("LOGITS", logits_dtype, [num_classes])],
        outputs=outputs,
        comment="Postprocessing: softmax over the logits, then the top-k labels, scores and class ids.",
    )
    logits = TensorSpec("LOGITS", logits_dtype, ("batch", num_classes))
    source = render_source(
        env,
        "model/classification_postprocess.py.j2",
        ctx.postprocess_context(names["postprocess"], names["model"], logits, settings.top_k, num_classes),
    )
    files: dict[str, Path | bytes] = {
        "model.py": source.encode(),
        "labels.txt": ("\n".join(labels) + "\n").encode("utf-8"),
    }
    return RenderedModel(names["postprocess"], "postprocess", version, config, files)


def render_ensemble(
    env: Any,
    *,
    settings: PipelineSettings,
    version: int,
    inputs: Sequence[Mapping[str, Any]],
    num_classes: int,
    members: Sequence[RenderedModel],
    steps: Sequence[Mapping[str, Any]],
    comment: str,
) -> RenderedModel:
    from repo_builder.render.parse_back import parse_config

    sizes = [parse_config(m.config_text, m.name).max_batch_size for m in members]
    _, outputs = ctx.classification_outputs(settings.top_k, num_classes)
    context = ctx.ensemble_context(
        settings.name,
        inputs=inputs,
        outputs=outputs,
        member_max_batch_sizes=sizes,
        steps=steps,
        comment=comment,
        max_batch_size=settings.max_batch_size,
    )
    config = render_config(env, "ensemble", context)
    return RenderedModel(settings.name, "ensemble", version, config, {ENSEMBLE_PLACEHOLDER: PLACEHOLDER_TEXT})


def classification_steps(
    names: Mapping[str, str], pre_input: str, model_inputs: Sequence[str], logits_name: str
) -> list[dict[str, Any]]:
    """preprocess -> model -> postprocess; ensemble tensors carry the member tensors' names."""
    top_k_outputs = {n: n for n in ("LABELS", "SCORES", "CLASS_IDS")}
    return [
        {"model_name": names["preprocess"], "input_map": {pre_input: pre_input}, "output_map": {n: n for n in model_inputs}},
        {"model_name": names["model"], "input_map": {n: n for n in model_inputs}, "output_map": {logits_name: logits_name}},
        {"model_name": names["postprocess"], "input_map": {"LOGITS": logits_name}, "output_map": top_k_outputs},
    ]
