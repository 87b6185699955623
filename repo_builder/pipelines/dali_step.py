"""The ``--preprocess dali`` step: a DALI pipeline serialized to ``model.dali`` for Triton's DALI backend.

The image families choose it through their ``--preprocess`` option; the graph itself is
pipelines/dali_preprocess.py. The step takes the encoded image as TYPE_UINT8 [-1] (the DALI backend feeds
external sources raw bytes; ``allow_ragged_batch`` lets requests of different lengths batch) and runs on
KIND_GPU: the served pipeline decodes with nvJPEG (``device="mixed"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from repo_builder.errors import UserError
from repo_builder.pipelines.dali_preprocess import DALI_FILE, INPUT
from repo_builder.pipelines.family import FamilyOption
from repo_builder.pipelines.settings import PipelineSettings, step_names
from repo_builder.render import context as ctx
from repo_builder.render.render import render_config
from repo_builder.render.rendered import RenderedModel

PREPROCESS_CHOICES = ("python", "dali")
# The same option name as the text families' --preprocess python|onnx (issue 23).
PREPROCESS_OPTION = FamilyOption(
    ("--preprocess",), "preprocess",
    "python (default): a Python-backend step decodes and resizes on the CPU; dali: a DALI pipeline (model.dali, "
    "Triton's DALI backend) decodes with nvJPEG and resizes on a GPU (needs the 'dali' extra to build, a GPU "
    "server to serve; clients send the encoded image as TYPE_UINT8 [-1]).",
    default="python", kind="choice", choices=PREPROCESS_CHOICES, conflicts_with_export=False,
)


def wants_dali(params: Mapping[str, Any], settings: PipelineSettings) -> bool:
    """Whether ``--preprocess dali`` was asked for (refusing what it cannot serve)."""
    choice = str(params.get("preprocess") or "python")
    if choice not in PREPROCESS_CHOICES:
        raise UserError(f"--preprocess {choice!r}: expected one of {', '.join(PREPROCESS_CHOICES)}")
    if choice == "dali" and settings.nvcf is not None:
        raise UserError("--preprocess dali cannot read NVCF assets (--nvcf-assets): use --preprocess python")
    return choice == "dali"


def refuse_without_gpu(params: Mapping[str, Any], gpu: bool) -> None:
    """``--preprocess dali`` serves a GPU pipeline (nvJPEG): refuse a --no-gpu target before anything is built."""
    if not gpu and str(params.get("preprocess") or "python") == "dali":
        raise UserError("--preprocess dali runs on a GPU server (nvJPEG decoding); drop --no-gpu or use --preprocess python")


def dali_input_tensor() -> dict[str, Any]:
    """The pipeline's input as clients send it to the ensemble and the step: the encoded bytes."""
    return ctx.tensor_context(INPUT, "uint8", [-1])


def render_dali_step(
    env: Any, settings: PipelineSettings, version: int, *, pipeline: bytes, outputs: Sequence[Mapping[str, Any]], comment: str
) -> RenderedModel:
    """The preprocess model: config.pbtxt (backend "dali", GPU instances) and ``model.dali``."""
    name = step_names(settings.name)["preprocess"]
    context = ctx.config_context(
        name, inputs=[dali_input_tensor()], outputs=outputs, max_batch_size=settings.max_batch_size,
        max_queue_delay_us=settings.max_queue_delay_us, kind="KIND_GPU", instance_count=1, comment=comment,
    )
    return RenderedModel(name, "preprocess", version, render_config(env, "dali", context), {DALI_FILE: pipeline})


def serialize(pipeline: Any) -> bytes:
    """The pipeline's protobuf, as the DALI backend deserializes it."""
    data = pipeline.serialize()
    return bytes(data)
