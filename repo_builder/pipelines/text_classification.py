"""Text classification: text (TYPE_STRING [1]) -> tokenizer (Python) -> model -> top-k postprocess (Python).

The preprocessing step emits exactly the model's inputs (names and integer dtypes from the signature),
padded per batch, so the model step receives requests of equal shapes it can batch again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
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

TEXT_INPUT = "TEXT"


def tokenizer_files(tokenizer_dir: Path) -> dict[str, Path]:
    """Files of the saved fast tokenizer, placed under tokenizer/ in the preprocessing version folder."""
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise UserError(f"{tokenizer_dir}: no tokenizer.json; the preprocessing step needs a saved fast tokenizer")
    return {f"tokenizer/{p.name}": p for p in sorted(tokenizer_dir.iterdir()) if p.is_file()}


def render_text_pipeline(
    env: Any,
    source: ModelSource,
    onnx_signature: Signature,
    labels: Sequence[str],
    settings: PipelineSettings,
    versions: Mapping[str, int],
    tokenizer_dir: Path,
    origin: str = "signature.json",
) -> tuple[RenderedModel, ...]:
    names = step_names(settings.name)
    sig = source.signature
    ctx.require_batch_axis(sig, origin)
    preprocess = preprocess_metadata(onnx_signature, origin, "tokenizer settings")
    pre = ctx.text_preprocess_context(names["preprocess"], names["model"], sig.inputs, preprocess, origin)
    for spec in sig.inputs:
        if len(spec.triton_dims(sig.batch_axis)) != 1:
            raise UserError(f"{origin}: input '{spec.name}' must be (batch, sequence), got {list(spec.shape)}")
    logits = classifier_logits(sig, labels, origin)

    files: dict[str, Path | bytes] = {"model.py": render_source(env, "model/text_preprocess.py.j2", pre).encode()}
    files.update(tokenizer_files(tokenizer_dir))
    pre_model = render_preprocess_step(
        env,
        settings,
        versions[names["preprocess"]],
        pipeline_input=TEXT_INPUT,
        outputs=[ctx.tensor_context(t.name, t.dtype, [-1]) for t in sig.inputs],
        comment="Preprocessing: one UTF-8 text per row -> token ids padded to the batch's longest (multiple of 8).",
        files=files,
    )
    return render_classification_pipeline(
        env,
        source,
        settings,
        versions,
        origin,
        preprocess=pre_model,
        pipeline_input=TEXT_INPUT,
        model_inputs=[t.name for t in sig.inputs],
        logits=logits,
        labels=labels,
        comment="Clients call this: TEXT (UTF-8, TYPE_STRING [1]) -> LABELS, SCORES, CLASS_IDS (top-k).",
    )
