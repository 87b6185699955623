"""``--preprocess onnx`` for the text families: the tokenizer as an ONNX Runtime step instead of a Python one.

The step is an ``onnxruntime_onnx`` model (export/tokenizer_onnx.py builds its graph from the export's saved
tokenizer) whose config loads onnxruntime-extensions' custom-op library through ``model_operations``. Triton's
ONNX Runtime backend hands ``op_library_filename`` to ``RegisterCustomOpsLibrary`` as written (dlopen: an
absolute path, else the server's library search path; never the model folder), so the config names an
absolute path: by default this machine's library, ``--op-library PATH`` for the serving machine's.
No Python-backend step runs before the model; the ensemble's other steps are unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.deploy_target import DeployTarget
from repo_builder.errors import UserError
from repo_builder.export.tokenizer_onnx import (
    CHARS_PER_TOKEN,
    TextLimits,
    op_library_path,
    read_wordpiece_tokenizer,
    tokenizer_model_bytes,
)
from repo_builder.pipelines.family import FamilyOption, RenderInputs
from repo_builder.pipelines.settings import PipelineSettings, step_names
from repo_builder.render import context as ctx
from repo_builder.render.render import render_config
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import TensorSpec

PREPROCESS_CHOICES = ("python", "onnx")
OPTIONS = (
    FamilyOption(("--preprocess",), "preprocess", "Where texts are tokenized: python (a Python-backend step, any fast "
                 "tokenizer) or onnx (an ONNX Runtime step with onnxruntime-extensions' ops; BERT WordPiece tokenizers "
                 "only, no Python step before the model).", default="python", kind="choice", choices=PREPROCESS_CHOICES,
                 conflicts_with_export=False),
    FamilyOption(("--op-library",), "op_library", "With --preprocess onnx: the onnxruntime-extensions library's absolute "
                 "path on the serving machine (default: this machine's, from the onnxruntime-extensions package).",
                 kind="text", metavar="PATH", conflicts_with_export=False),
)
_ONNX_TYPES = {"int64": 7, "int32": 6}  # onnx.TensorProto element types


def wants_onnx(params: Mapping[str, Any]) -> bool:
    """Whether the build asked for --preprocess onnx (and --op-library only with it)."""
    choice = str(params.get("preprocess") or "python")
    if choice not in PREPROCESS_CHOICES:
        raise UserError(f"--preprocess {choice}: choose one of {', '.join(PREPROCESS_CHOICES)}")
    if params.get("op_library") and choice != "onnx":
        raise UserError("--op-library is read only with --preprocess onnx")
    return choice == "onnx"


def check_checkpoint_tokenizer(params: Mapping[str, Any], model_dir: Path) -> None:
    """With --preprocess onnx, refuse a checkpoint's tokenizer the graph cannot reproduce before anything is exported."""
    if wants_onnx(params):
        op_library(params)
        if (model_dir / "tokenizer.json").is_file():
            read_wordpiece_tokenizer(model_dir / "tokenizer.json")


def op_library(params: Mapping[str, Any], target: DeployTarget | None = None) -> str:
    """The op library path the config names: --op-library (absolute); for an image built from the Dockerfile,
    where its pip install puts the library there; with no target, this machine's. Never this machine's path
    for a target: no server has it (check_target refuses that case before the export)."""
    given = params.get("op_library")
    if given:
        if not Path(str(given)).is_absolute():
            raise UserError(f"--op-library {given}: give an absolute path (ONNX Runtime opens it as written, "
                            "from the server's working folder otherwise)")
        return str(given)
    local = op_library_path()
    if target is None:
        return str(local)
    check_target(params, target)
    return image_library_path(local.name, target)


def image_library_path(local_name: str, target: DeployTarget) -> str:
    """Where ``pip3 install onnxruntime-extensions`` puts the library in the image: the system Python's
    dist-packages (Debian's layout), the file named for the image's Python and platform."""
    digits = target.python.replace(".", "")
    name = re.sub(r"cpython-\d+-[A-Za-z0-9_]+-linux-gnu", f"cpython-{digits}-{target.platform}-linux-gnu", local_name)
    return f"/usr/local/lib/python{target.python}/dist-packages/onnxruntime_extensions/{name}"


def check_target(params: Mapping[str, Any], target: DeployTarget) -> None:
    """--preprocess onnx needs onnxruntime-extensions' library at a path on the server: the stock image has
    none, and the ONNX Runtime backend never looks in the model folder. Refused before anything is exported."""
    if not params.get("op_library") and str(params.get("preprocess") or "python") == "onnx" and target.step_packages != "dockerfile":
        raise UserError(
            f"--preprocess onnx: {target.image_name} has no onnxruntime-extensions, and the ONNX Runtime backend opens "
            "op_library_filename as written (a path on the server, never one inside the repository): pass "
            "--step-packages dockerfile (the Dockerfile installs it and the config names its path in that image), "
            "or --op-library PATH where your servers have it"
        )


def render_tokenizer_step(inputs: RenderInputs, model_inputs: Sequence[TensorSpec], max_length: int,
                          tokenizer_dir: Path, pipeline_input: str) -> RenderedModel:
    """The preprocessing step as an ONNX Runtime model: TEXT -> exactly the model's inputs."""
    settings: PipelineSettings = inputs.settings
    name = step_names(settings.name)["preprocess"]
    outputs: dict[str, int] = {}
    for spec in model_inputs:
        if spec.dtype not in _ONNX_TYPES:
            raise UserError(f"{inputs.origin}: model input '{spec.name}' must be int32 or int64, got {spec.dtype}")
        outputs[spec.name] = _ONNX_TYPES[spec.dtype]
    limits = TextLimits(text_chars=max_length * CHARS_PER_TOKEN, request_chars=settings.max_request_bytes)
    model = tokenizer_model_bytes(tokenizer_dir, max_length, outputs, limits)
    context = ctx.config_context(
        name,
        inputs=[ctx.tensor_context(pipeline_input, "object", [1])],
        outputs=[ctx.tensor_context(s.name, s.dtype, [-1]) for s in model_inputs],
        max_batch_size=settings.max_batch_size,
        max_queue_delay_us=settings.max_queue_delay_us,
        kind="KIND_CPU",
        instance_count=settings.step_instance_count,
        comment=f"Preprocessing in ONNX Runtime: one UTF-8 text per row -> token ids (BERT WordPiece, truncated to "
                f"{max_length}), padded to the request's longest; onnxruntime-extensions' ops, no Python step. Refused "
                f"before tokenizing: a text over {limits.text_chars} characters, a request over {limits.request_chars} characters.",
        parameters={},
        op_libraries=[op_library(inputs.params, inputs.env.globals.get("deploy_target"))],
    )
    # The graph's refusals fail the whole execution: without a batcher an execution is one request.
    config = render_config(inputs.env, "onnxruntime_onnx", {**context, "batching": None})
    return RenderedModel(name, "preprocess", inputs.versions[name], config, {"model.onnx": model})
