"""Rules RB4xx (DALI): what Triton's DALI backend refuses, read from dali_backend's source (main, June 2026).

src/dali_model.h (DaliModel): the file name from ``default_model_filename`` (default model.dali, fallback
dali.py) must pass ``ValidateFilename``; the pipeline is instantiated with the config's max_batch_size (so the
serialized batch size never refuses anything) on the server's GPU, else on the CPU. src/config_tools/
config_tools.cc: ``AutofillConfig`` (auto-complete on) and ``ValidateConfig`` (--disable-auto-complete-config)
match inputs by name and outputs by position. The pipeline is read by analysis/dali_pipeline.py from its
protobuf bytes, never deserialized with DALI; a model.dali that is not a serialized pipeline (an autoserialized
Python script) is not judged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from repo_builder.validate.analysis.dali_pipeline import (
    DaliPipeline,
    NotAPipeline,
    PipelineTensor,
    read_dali_pipeline,
)
from repo_builder.validate.analysis.devices import KIND_CPU, resolved_kind
from repo_builder.validate.analysis.enums import enum_name
from repo_builder.validate.analysis.files import UnsafeFile, read_bounded
from repo_builder.validate.analysis.resolve import judged, resolve_backend
from repo_builder.validate.analysis.versions import version_folder, versions_to_load
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, rule

# dali_backend src/utils/utils.h is_char_filename_allowed: a-z, A-Z, 0-9, _, ., -
_FILENAME = re.compile(r"[A-Za-z0-9_.\-]*")
MAX_DALI_BYTES = 64 * 1024 * 1024  # serialized pipelines are kilobytes; larger ones are not read


def _dali_filename(model: ModelEntry, ctx: RuleContext) -> str | None:
    """The file the DALI backend loads first, when the model resolves to the DALI backend."""
    if not judged(model, ctx) or model.is_ensemble:
        return None
    resolved = resolve_backend(model)
    if resolved.problem is not None or resolved.backend != "dali":
        return None
    return resolved.default_model_filename or "model.dali"


@rule("RB411", "dali-model-filename-invalid", field="default_model_filename")
def check_dali_filename(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A DALI model's ``default_model_filename`` holds a character the DALI backend refuses.

    The backend checks the name before it looks for the file: only ``a-z``, ``A-Z``, ``0-9``, ``_``, ``.``
    and ``-`` are allowed, so a sub-folder (``pipelines/model.dali``) or a space fails the load with
    "Model file name '...' contains an invalid character".

    Fails: ``default_model_filename: "my pipeline.dali"``.

    Passes: ``default_model_filename: "my_pipeline.dali"`` (or none: model.dali).
    """
    name = _dali_filename(model, ctx)
    if name is None:
        return
    bad = next((c for c in name if not _FILENAME.fullmatch(c)), None)
    if bad is not None:
        yield Finding(f"Model file name '{name}' contains an invalid character: '{bad}' (the DALI backend allows a-z, A-Z, 0-9, _, ., -)",
                      hint="rename the file and default_model_filename to use only those characters")


def _pipelines(model: ModelEntry, ctx: RuleContext) -> Iterator[tuple[int, Path, DaliPipeline]]:
    name = _dali_filename(model, ctx)
    if name is None or not _FILENAME.fullmatch(name):
        return
    for number in versions_to_load(model):
        v = version_folder(model, number)
        entry = v.entry(name) if v is not None else None
        if v is None or entry is None or entry.is_dir or entry.escapes or entry.size is None or entry.size > MAX_DALI_BYTES:
            continue  # RB405 / RB103 report missing and escaping files; dali.py fallbacks are Python
        path = v.path / name
        try:
            pipeline = read_dali_pipeline(read_bounded(path, model.path.parent, MAX_DALI_BYTES))
        except (UnsafeFile, NotAPipeline):
            continue  # an autoserialized Python model.dali, or a file the load itself will judge
        yield number, path, pipeline


def _tensor_problems(tensor: Any, declared: PipelineTensor, batched: bool) -> Iterator[str]:
    """config_tools.cc ProcessDtypeConfig / MatchShapes on one declared config tensor (name as the config's)."""
    # The enum from the tensor's own descriptor: importing tritonclient.grpc here would pull in grpc (scan.py).
    data_type = enum_name(tensor.DESCRIPTOR.fields_by_name["data_type"].enum_type, tensor.data_type)
    if declared.dtype is not None and data_type != "TYPE_INVALID" and data_type != declared.dtype:
        yield (f'Mismatch of data_type config for "{tensor.name}". Data type defined in config: {data_type}, '
               f"in the pipeline: {declared.dtype}")
    dims = list(tensor.dims)
    if declared.ndim is not None and dims:
        want = declared.ndim if batched else declared.ndim + 1  # unbatched: the pipeline's batch axis is in dims
        if len(dims) != want:
            yield (f'Mismatch in number of dimensions for "{tensor.name}". Number of dimensions defined in config: {len(dims)}, '
                   f"in the pipeline: {want}")


def _declared(model: ModelEntry, kind: str) -> list[str]:
    config = model.config
    if config is None:
        return []
    return [t.name for t in (config.input if kind == "input" else config.output)]


@rule("RB412", "dali-pipeline-io", field="input")
def check_dali_pipeline_io(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """The config's inputs or outputs do not fit the serialized DALI pipeline.

    The DALI backend reads the pipeline's external sources (its inputs, matched by name) and outputs
    (matched by position, whatever their names). With auto-complete on it refuses an input the pipeline
    does not have ("Configuration file contains config for X but such input is not present in the
    pipeline.") and more outputs than the pipeline has, and fills in the rest; with
    ``--disable-auto-complete-config`` (``--strict``) every pipeline input must be declared ("Missing config
    for "X" input.") and the output count must be equal. Where the pipeline declares a tensor's type
    (``fn.external_source(dtype=...)``, ``pipeline_def(output_dtype=...)``) or dimensions (``ndim``,
    ``output_ndim``), a config ``data_type`` or ``dims`` that disagrees is refused too (one more dimension
    with ``max_batch_size: 0``).

    Fails: ``input [{ name: "INPUT" ... }]`` for a pipeline whose ``fn.external_source`` is named ``IMAGE``.

    Passes: ``input [{ name: "IMAGE" data_type: TYPE_UINT8 dims: [ -1 ] }]`` and one output per pipeline output.
    """
    inputs, outputs = _declared(model, "input"), _declared(model, "output")
    config = model.config
    batched = config is None or config.max_batch_size != 0
    for number, path, pipeline in _pipelines(model, ctx):
        if config is not None:
            declared_inputs = pipeline.input_tensors
            pairs: list[tuple[Any, PipelineTensor]] = [(t, declared_inputs[t.name]) for t in config.input if t.name in declared_inputs]
            split = any("split" in key for key in config.parameters)  # split outputs lose their outer axis
            pairs += [(t, d) for t, d in zip(config.output, pipeline.output_tensors, strict=False) if not split]
            for tensor, declared in pairs:
                for message in _tensor_problems(tensor, declared, batched):
                    yield Finding(message, version=number, field="data_type" if "data_type" in message else "dims",
                                  hint="make the config match what the pipeline declares (or leave the field out: auto-complete fills it)")
        for name in inputs:
            if name not in pipeline.inputs:
                yield Finding(f"Configuration file contains config for {name} but such input is not present in the pipeline "
                              f"(its inputs: {', '.join(pipeline.inputs) or 'none'})", version=number,
                              hint="name the config input as the pipeline's fn.external_source(name=...)")
        if ctx.options.strict:
            for name in pipeline.inputs:
                if name not in inputs:
                    yield Finding(f'Missing config for "{name}" input. (auto-complete is off: declare every pipeline input)',
                                  version=number)
        too_many = len(outputs) > len(pipeline.outputs)
        if too_many or (ctx.options.strict and len(outputs) != len(pipeline.outputs)):
            yield Finding(f"The number of outputs specified in the DALI pipeline and the configuration file do not match "
                          f"(config {len(outputs)}, {path.name} {len(pipeline.outputs)})", version=number, field="output",
                          hint="declare one output per pipeline output, in the pipeline's order")


@rule("RB413", "dali-pipeline-needs-gpu", field="instance_group")
def check_dali_needs_gpu(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A serialized DALI pipeline with GPU operators, on CPU instances or a target without GPUs (``--no-gpu``).

    A pipeline decoding with ``fn.decoders.image(device="mixed")`` (nvJPEG) or resizing on the GPU needs
    a CUDA device. The DALI backend builds each instance's pipeline on that instance's GPU, and for an
    instance without a CUDA stream (a ``KIND_CPU`` instance, or ``KIND_AUTO`` on a machine without GPUs) on
    the CPU only (``dali_model_instance.h`` ``GetDaliDeviceId``), where GPU operators cannot run: the load fails.

    Fails: a ``model.dali`` with a ``device="mixed"`` decoder and ``instance_group [{ kind: KIND_CPU }]``, or
    validated with ``--no-gpu``.

    Passes: the same with ``kind: KIND_GPU`` on a GPU target, or a pipeline whose operators all run on the CPU.
    """
    config = model.config
    cpu_groups = [] if config is None else [g for g in config.instance_group
                                            if resolved_kind(g, ctx.options.gpu_present, ctx.options.gpu_count) == KIND_CPU]
    if ctx.options.gpu_present and not cpu_groups:
        return
    where = "this target has no GPU" if not ctx.options.gpu_present else "its instance_group runs KIND_CPU instances"
    for number, path, pipeline in _pipelines(model, ctx):
        gpu_ops = sorted({op.name for op in pipeline.ops if "gpu" in op.devices})
        if gpu_ops:
            yield Finding(f"{path.name} runs {', '.join(gpu_ops[:4])} on the GPU; {where}, and the DALI backend builds the "
                          "pipeline of such an instance on the CPU, where they cannot run", version=number,
                          hint="use KIND_GPU instances on a GPU server, or build the pipeline with CPU operators "
                               "(repo-builder build --preprocess python)")


def applies(model: ModelEntry, ctx: RuleContext) -> bool:
    """Whether a rule of this module can find anything: each one finds only through ``_dali_filename``,
    which is None unless the model resolves to the DALI backend (the engine skips the rest for others)."""
    return _dali_filename(model, ctx) is not None


RULES: tuple[Rule, ...] = (check_dali_filename, check_dali_pipeline_io, check_dali_needs_gpu)
GATED: tuple[Rule, ...] = RULES  # every rule here checks the gate's condition first
