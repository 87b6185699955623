"""What the classification families share: labels, the logits output, the top-k postprocessing step and
the preprocess -> model -> postprocess ensemble."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.nvcf import asset_input_name
from repo_builder.pipelines.chain import chain_steps, render_chain
from repo_builder.pipelines.dali_preprocess import FORMATS, IMAGE_SIZE
from repo_builder.pipelines.family import RenderInputs
from repo_builder.pipelines.nvcf_assets import nvcf_step_inputs
from repo_builder.pipelines.option_files import describe_path
from repo_builder.pipelines.settings import ModelSource, PipelineSettings, step_names
from repo_builder.pipelines.steps import python_step_config
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import Signature, TensorSpec

TOP_K_OUTPUTS = ("LABELS", "SCORES", "CLASS_IDS")


def read_labels(path: Path, num_classes: int, origin: str) -> tuple[str, ...]:
    """One label per line, as many as the model has classes."""
    problem = describe_path(path)
    if problem is not None:
        raise UserError(f"{path}: labels file {problem}; write one label per line")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the labels file ({exc})") from None
    labels = tuple(line.rstrip("\r") for line in text.split("\n"))
    if labels and labels[-1] == "":
        labels = labels[:-1]
    if len(labels) != num_classes:
        raise UserError(f"{path}: {len(labels)} labels, but {origin} has {num_classes} classes; write one label per line")
    return labels


def class_count(signature: Signature, origin: str = "signature.json") -> int:
    return ctx.single_logits_output(signature, origin).triton_dims(signature.batch_axis)[0]


def classifier_logits(signature: Signature, labels: Sequence[str], origin: str) -> TensorSpec:
    """The logits output, with exactly one label per class."""
    logits = ctx.single_logits_output(signature, origin)
    count = logits.triton_dims(signature.batch_axis)[0]
    if len(labels) != count:
        raise UserError(f"{origin}: {len(labels)} labels for {count} classes; pass --labels FILE with one label per line")
    return logits


def render_postprocess_step(
    env: Any, logits_dtype: str, labels: Sequence[str], settings: PipelineSettings, version: int, origin: str,
    max_image_pixels: int | None = None, resize: int | None = None,
) -> RenderedModel:
    """Softmax and top-k in Python; the labels travel as labels.txt beside model.py (read at run time).
    ``max_image_pixels``: a DALI preprocess step's limit; the step also takes IMAGE_SIZE (each image's header h, w)
    and refuses a request whose image the DALI step did not decode: over the limit, ``resize`` (its Resize(int))
    past it, or no image."""
    names = step_names(settings.name)
    count = len(labels)
    if any("\n" in label or "\r" in label for label in labels):
        raise UserError(f"{origin}: a label contains a line break")
    _, outputs = ctx.classification_outputs(settings.top_k, count)
    config = python_step_config(
        env,
        names["postprocess"],
        settings,
        inputs=[ctx.tensor_context("LOGITS", logits_dtype, [count])]
        + ([ctx.tensor_context(IMAGE_SIZE, "int64", [2])] if max_image_pixels is not None else []),
        outputs=outputs,
        comment="Postprocessing: softmax over the logits, then the top-k labels, scores and class ids.",
    )
    logits = TensorSpec("LOGITS", logits_dtype, ("batch", count))
    source = render_source(
        env,
        "model/classification_postprocess.py.j2",
        {**ctx.postprocess_context(names["postprocess"], names["model"], logits, settings.top_k, count),
         **({"image_size_name": IMAGE_SIZE, "max_image_pixels": max_image_pixels, "resize": resize, "formats": FORMATS}
            if max_image_pixels is not None else {})},
    )
    files: dict[str, Path | bytes] = {
        "model.py": source.encode(),
        "labels.txt": ("\n".join(labels) + "\n").encode("utf-8"),
    }
    return RenderedModel(names["postprocess"], "postprocess", version, config, files)


def classification_steps(
    names: Mapping[str, str], pre_input: str, model_inputs: Sequence[str], logits_name: str, extra_inputs: Sequence[str] = (),
    carried: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """preprocess -> model -> postprocess; ensemble tensors carry the member tensors' names (``extra_inputs``:
    more ensemble inputs the preprocessing step takes, e.g. NVCF asset ids; ``carried``: preprocess outputs the
    postprocess step reads under the same name, e.g. a DALI step's IMAGE_SIZE)."""
    return chain_steps(names, pipeline_inputs=[pre_input, *extra_inputs], model_inputs=model_inputs,
                       model_outputs=[logits_name], post_inputs={"LOGITS": logits_name, **{n: n for n in carried}},
                       outputs=TOP_K_OUTPUTS, carried=carried)


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
    ensemble_input: Mapping[str, Any] | None = None,
    max_image_pixels: int | None = None,
    resize: int | None = None,
) -> tuple[RenderedModel, ...]:
    """preprocess -> model -> top-k postprocess, and the ensemble clients call (``comment`` heads its config;
    ``ensemble_input``: the pipeline input's tensor when it is not one string per row, e.g. DALI's bytes;
    ``max_image_pixels``, ``resize``: a DALI step's limit and Resize(int), IMAGE_SIZE carried from it to the
    postprocess step's check)."""
    names = step_names(settings.name)
    post = render_postprocess_step(env, logits.dtype, labels, settings, versions[names["postprocess"]], origin, max_image_pixels,
                                   resize)
    _, outputs = ctx.classification_outputs(settings.top_k, len(labels))
    return render_chain(
        env, source, settings, versions, origin,
        pre=preprocess,
        post=post,
        ensemble_inputs=(nvcf_step_inputs(pipeline_input) if settings.nvcf
                         else [dict(ensemble_input) if ensemble_input else ctx.tensor_context(pipeline_input, "object", [1])]),
        ensemble_outputs=outputs,
        steps=classification_steps(names, pipeline_input, model_inputs, logits.name,
                                   (asset_input_name(pipeline_input),) if settings.nvcf else (),
                                   (IMAGE_SIZE,) if max_image_pixels is not None else ()),
        comment=comment,
    )


def family_labels(inputs: RenderInputs) -> tuple[str, ...]:
    """The classes' labels: --labels, else those export wrote (labels.txt beside model.onnx), else class_i."""
    artifact = inputs.artifact
    num_classes = class_count(artifact.signature, inputs.origin)
    if inputs.labels_file is not None:
        return read_labels(inputs.labels_file, num_classes, "the model")
    if artifact.labels:
        return tuple(artifact.labels)
    labels_file = artifact.onnx_path.parent / str(artifact.signature.metadata.get("labels_file", "labels.txt"))
    if labels_file.is_file():
        return read_labels(labels_file, num_classes, "the model")
    return tuple(f"class_{i}" for i in range(num_classes))
