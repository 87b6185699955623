"""Image classification: encoded image bytes -> preprocess (Python) -> model -> top-k postprocess (Python).

The pipeline input is TYPE_STRING with dims [1]: one encoded image (JPEG/PNG/WebP) per batch row.
TYPE_UINT8 [-1] would carry the same bytes, but the dynamic batcher only joins requests whose shapes are
equal, and encoded images almost never have the same byte length: with [-1] nothing would batch. A
string element has shape [1] whatever its length, so any images batch together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from repo_builder.errors import UserError
from repo_builder.pipelines.common import (
    ModelSource,
    PipelineSettings,
    classifier_logits,
    preprocess_metadata,
    render_classification_pipeline,
    render_preprocess_step,
    step_names,
)
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import Signature

IMAGE_INPUT = "IMAGE"


def render_image_pipeline(
    env: Any,
    source: ModelSource,
    onnx_signature: Signature,
    labels: Sequence[str],
    settings: PipelineSettings,
    versions: Mapping[str, int],
    origin: str = "signature.json",
) -> tuple[RenderedModel, ...]:
    """Render the four models; ``versions`` maps each model name to the version folder to write."""
    names = step_names(settings.name)
    sig = source.signature
    ctx.require_batch_axis(sig, origin)
    if len(sig.inputs) != 1:
        raise UserError(f"{origin}: an image classifier takes one input, found {', '.join(t.name for t in sig.inputs)}")
    model_input = sig.inputs[0]
    preprocess = preprocess_metadata(onnx_signature, origin, "image transforms")
    pre = ctx.image_preprocess_context(
        names["preprocess"], names["model"], model_input, preprocess, draft_margin=settings.draft_margin, origin=origin
    )
    dims = list(model_input.triton_dims(sig.batch_axis))
    crop_h, crop_w = pre["crop"]
    want = [3, crop_h, crop_w] if pre["layout"] == "NCHW" else [crop_h, crop_w, 3]
    if len(dims) != 3 or any(d not in (-1, w) for d, w in zip(dims, want, strict=True)):
        raise UserError(f"{origin}: input '{model_input.name}' has dims {dims}, which a {pre['layout']} {crop_h}x{crop_w} crop cannot fill")
    logits = classifier_logits(sig, labels, origin)

    pre_model = render_preprocess_step(
        env,
        settings,
        versions[names["preprocess"]],
        pipeline_input=IMAGE_INPUT,
        outputs=[ctx.tensor_context(model_input.name, model_input.dtype, want)],
        comment="Preprocessing: one encoded image (TYPE_STRING [1]) per row -> resize, center-crop, normalize.",
        files={"model.py": render_source(env, "model/image_preprocess.py.j2", pre).encode()},
    )
    return render_classification_pipeline(
        env,
        source,
        settings,
        versions,
        origin,
        preprocess=pre_model,
        pipeline_input=IMAGE_INPUT,
        model_inputs=[model_input.name],
        logits=logits,
        labels=labels,
        comment="Clients call this: IMAGE (encoded bytes, TYPE_STRING [1]) -> LABELS, SCORES, CLASS_IDS (top-k).",
    )
