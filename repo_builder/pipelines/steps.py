"""Generic steps every family uses: a Python pre/post step's config, the preprocessing step, the ensemble."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.pipelines.nvcf_assets import ASSET_PARAMETERS_COMMENT, nvcf_step_inputs
from repo_builder.pipelines.settings import PipelineSettings, step_names
from repo_builder.render import context as ctx
from repo_builder.render.parse_back import parse_config
from repo_builder.render.render import render_config
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import Signature
from repo_builder.triton_layout import PLACEHOLDER_FILE

# Object stores (S3, GCS) have no folders, only keys: an empty version folder vanishes on upload and
# Triton then refuses the ensemble ("at least one version must be available").
PLACEHOLDER_TEXT = (
    b"An ensemble has no model file. This file keeps its version folder when the repository is copied to an\n"
    b"object store (S3, GCS, Azure), which drops empty folders; Triton ignores it.\n"
)


def python_step_config(
    env: Any,
    name: str,
    settings: PipelineSettings,
    *,
    inputs: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
    comment: str,
    instance_count: int | None = None,
    parameters: Mapping[str, str] | None = None,
    parameters_comment: str | None = None,
) -> str:
    """config.pbtxt of a Python-backend pre/post step: its own CPU instance count (not the model step's;
    default ``settings.step_instance_count``), batching as the pipeline's settings say; ``parameters``: its
    string parameters, headed by ``parameters_comment``."""
    context = ctx.config_context(
        name,
        inputs=inputs,
        outputs=outputs,
        max_batch_size=settings.max_batch_size,
        max_queue_delay_us=settings.max_queue_delay_us,
        kind="KIND_CPU",
        instance_count=settings.step_instance_count if instance_count is None else instance_count,
        comment=comment,
        parameters=parameters,
        parameters_comment=parameters_comment,
    )
    return render_config(env, "python", context)


def preprocess_metadata(onnx_signature: Signature, origin: str, records: str) -> Mapping[str, Any]:
    """The ``preprocess`` block export recorded in signature.json (``records``: what it holds, for the error)."""
    preprocess = onnx_signature.metadata.get("preprocess")
    if not isinstance(preprocess, dict):
        raise UserError(f"{origin}: metadata.preprocess is missing; re-run 'repo-builder export' to record the {records}")
    return preprocess


def render_preprocess_step(
    env: Any,
    settings: PipelineSettings,
    version: int,
    *,
    pipeline_input: str,
    outputs: Sequence[Mapping[str, Any]],
    comment: str,
    files: Mapping[str, Path | bytes],
    instance_count: int | None = None,
    asset_parameters: Mapping[str, str] | None = None,
) -> RenderedModel:
    """The Python step that turns the pipeline's one string input into the model's inputs. With
    ``asset_parameters`` (``build --nvcf-assets``) it also takes the asset ids input, both optional."""
    name = step_names(settings.name)["preprocess"]
    inputs = [ctx.tensor_context(pipeline_input, "object", [1])]
    if asset_parameters:
        inputs = nvcf_step_inputs(pipeline_input)
    config = python_step_config(
        env, name, settings, inputs=inputs, outputs=outputs, comment=comment,
        instance_count=instance_count, parameters=asset_parameters, parameters_comment=ASSET_PARAMETERS_COMMENT,
    )
    return RenderedModel(name, "preprocess", version, config, dict(files))


def render_ensemble(
    env: Any,
    *,
    settings: PipelineSettings,
    version: int,
    inputs: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
    members: Sequence[RenderedModel],
    steps: Sequence[Mapping[str, Any]],
    comment: str,
) -> RenderedModel:
    """The model clients call; its max_batch_size never exceeds a member's (read back from their configs)."""
    sizes = [parse_config(m.config_text, m.name).max_batch_size for m in members]
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
    return RenderedModel(settings.name, "ensemble", version, config, {PLACEHOLDER_FILE: PLACEHOLDER_TEXT})
