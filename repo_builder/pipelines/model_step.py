"""The model step of every pipeline: the exported model itself, for the chosen runtime.

Generic: every family renders its model through this one function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repo_builder.pipelines.settings import ModelSource, PipelineSettings, step_names
from repo_builder.render import context as ctx
from repo_builder.render import tuning
from repo_builder.render.render import render_config, render_source
from repo_builder.render.rendered import RenderedModel


def render_model_step(
    env: Any, source: ModelSource, settings: PipelineSettings, version: int, origin: str
) -> RenderedModel:
    """The model itself, for the chosen runtime."""
    name = step_names(settings.name)["model"]
    sig = source.signature
    ctx.require_batch_axis(sig, origin)
    common: dict[str, Any] = {  # config_context keywords of several types
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
                name,
                kind="KIND_CPU",
                comment="The model: ONNX Runtime (CPU) inside the Python backend.",
                # model.py reads its thread layout from these at load (0 threads: cores seen // instances).
                parameters=tuning.python_model_parameters(settings.intra_op_threads),
                **common,
            ),
        )
        files["model.py"] = render_source(env, "model/onnx_python_model.py.j2", ctx.onnx_python_model_context(name, sig)).encode()
    elif settings.runtime == "onnxruntime":
        config = render_config(
            env,
            "onnxruntime_onnx",
            ctx.config_context(
                name,
                kind="KIND_CPU",
                comment="The model: Triton's ONNX Runtime backend.",
                parameters=tuning.onnxruntime_backend_parameters(settings.intra_op_threads),
                **common,
            ),
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
