"""The generic preprocess -> model -> postprocess chain every family renders: its ensemble steps and the
model step + ensemble around a family's own pre and post steps.

Tensors a post step needs from the pre step (a tokenizer's offsets, an image's original size) travel as
``carried`` ensemble tensors: the pre step outputs them, the model step never sees them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.pipelines.model_step import render_model_step
from repo_builder.pipelines.settings import ModelSource, PipelineSettings, step_names
from repo_builder.pipelines.steps import render_ensemble
from repo_builder.render.rendered import RenderedModel


def chain_steps(
    names: Mapping[str, str],
    *,
    pipeline_inputs: Sequence[str],
    model_inputs: Sequence[str],
    model_outputs: Sequence[str],
    post_inputs: Mapping[str, str],
    outputs: Sequence[str],
    carried: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The ensemble's steps; ensemble tensors carry the member tensors' names.

    ``post_inputs``: the post step's input name -> the ensemble tensor feeding it (a model output or a
    ``carried`` tensor); ``outputs``: the post step's outputs, which are the ensemble's.
    """
    produced = set(model_outputs) | set(carried)
    unfed = sorted(tensor for tensor in post_inputs.values() if tensor not in produced)
    if unfed:  # an ensemble reading a tensor nothing produces never loads: say so at build time
        raise UserError(f"the postprocess step reads {', '.join(unfed)}, which neither the model nor the preprocess step outputs")
    clash = sorted(set(carried) & (set(model_inputs) | set(model_outputs)))
    if clash:
        raise UserError(f"carried tensor names {', '.join(clash)} are also model tensors; rename them")
    return [
        {"model_name": names["preprocess"], "input_map": {n: n for n in pipeline_inputs},
         "output_map": {n: n for n in (*model_inputs, *carried)}},
        {"model_name": names["model"], "input_map": {n: n for n in model_inputs}, "output_map": {n: n for n in model_outputs}},
        {"model_name": names["postprocess"], "input_map": dict(post_inputs), "output_map": {n: n for n in outputs}},
    ]


def pre_model_steps(
    names: Mapping[str, str], *, pipeline_inputs: Sequence[str], model_inputs: Sequence[str], model_outputs: Mapping[str, str]
) -> list[dict[str, Any]]:
    """preprocess -> model, for a family whose model output is already the answer (``model_outputs``: the
    model's output name -> the ensemble output it becomes): no Python round trip after the model."""
    return [
        {"model_name": names["preprocess"], "input_map": {n: n for n in pipeline_inputs}, "output_map": {n: n for n in model_inputs}},
        {"model_name": names["model"], "input_map": {n: n for n in model_inputs}, "output_map": dict(model_outputs)},
    ]


def render_chain(
    env: Any,
    source: ModelSource,
    settings: PipelineSettings,
    versions: Mapping[str, int],
    origin: str,
    *,
    pre: RenderedModel,
    post: RenderedModel | None,
    ensemble_inputs: Sequence[Mapping[str, Any]],
    ensemble_outputs: Sequence[Mapping[str, Any]],
    steps: Sequence[Mapping[str, Any]],
    comment: str,
    ensemble_files: Mapping[str, bytes | Path] | None = None,
) -> tuple[RenderedModel, ...]:
    """The model step (generic, any runtime) and the ensemble around the family's own pre and post steps.

    ``post`` None: preprocess -> model only (``pre_model_steps``). ``ensemble_files``: extra files in the
    ensemble's version folder (a README.md saying what it serves).
    """
    names = step_names(settings.name)
    model = render_model_step(env, source, settings, versions[names["model"]], origin)
    ensemble = render_ensemble(
        env,
        settings=settings,
        version=versions[names["ensemble"]],
        inputs=ensemble_inputs,
        outputs=ensemble_outputs,
        members=(pre, model) if post is None else (pre, model, post),
        steps=steps,
        comment=comment,
    )
    if ensemble_files:
        ensemble = RenderedModel(ensemble.name, ensemble.role, ensemble.version, ensemble.config_text,
                                 {**dict(ensemble.files), **dict(ensemble_files)})
    return (pre, model, ensemble) if post is None else (pre, model, post, ensemble)
