"""Rules RB2xx (continued): a config's inputs and outputs (core's ``ValidateModelIOConfig`` and friends).

Triton checks inputs and outputs when the config is read if auto-complete is off, and only after the
backend has filled in what it reads from the model file if auto-complete is on (the default). So a
missing ``data_type`` or ``dims`` is an error under ``--strict`` or for a backend that fills in nothing
(analysis/backends.py says which), and otherwise a note that the answer needs the model file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, cast

from repo_builder.validate.analysis.autocomplete import declared_io_filled
from repo_builder.validate.analysis.enums import INVALID_PROTOCOL_NAME, enum_name, is_named
from repo_builder.validate.analysis.files import regular_file_size, relative_inside
from repo_builder.validate.analysis.resolve import config_name, model_backend
from repo_builder.validate.analysis.shapes import (
    FORMAT_NCHW,
    FORMAT_NHWC,
    TYPE_INVALID,
    TYPE_STRING,
    config_ios,
    io_shape_problems,
    io_summary,
)
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import BatchOutput, ModelInput, ModelOutput


@rule("RB202", "io-data-type-and-dims", field="input", quiet="io_complete")
def check_io_required_fields(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Every input and output needs a `name`, a `data_type` and non-empty `dims`.

    Triton: "model input 'X' must specify 'data_type'", "... must specify 'dims'". With auto-complete
    on (Triton's default), backends that read the model file (TensorRT, TensorFlow SavedModel, DALI, a
    Python model with `auto_complete_config`) fill these in first, so the answer needs the model file
    and this rule only notes it; under `--strict` it is an error. ONNX Runtime and OpenVINO fill inputs
    only when the config declares none (outputs likewise), and PyTorch and TensorFlow GraphDef fill
    nothing: a declared tensor missing a field is refused there. A scalar per batch item is
    written `dims: [ 1 ]` with `reshape: { shape: [ ] }`: empty `dims` are never accepted.

    A `data_type` number the proto does not name (`data_type: 99`: proto3 enums are open, so Triton's
    parser accepts it) is an error: core refuses only `TYPE_INVALID` at load, names any other unknown
    number `<invalid>`, and refuses every request for the tensor ("inference input 'x' data-type is
    'FP32', but model 'm' expects '<invalid>'"); no client can send that type.

    Fails (strict): `input [ { name: "x" dims: [ 3 ] } ]`. Passes: add `data_type: TYPE_FP32`.
    """
    if model.config is None or io_summary(model).complete:
        return
    name = config_name(model)
    filled: bool | None = None  # asked only when something is missing: it may read model.py
    for kind, io in config_ios(model):
        if not io.name:
            yield Finding(f"{kind} must specify 'name' for {name}")
            continue
        if not is_named(type(io).DESCRIPTOR.fields_by_name["data_type"].enum_type, io.data_type):
            yield _unknown_type_finding(kind, io.name, io.data_type, name)
        for field in _missing_fields(io):
            if filled is None:
                filled = declared_io_filled(model, ctx)
            yield _missing_field_finding(model, kind, io.name, field, filled)


def _unknown_type_finding(kind: str, tensor: str, number: int, name: str) -> Finding:
    # Core's DataTypeToProtocolString names any number it does not know '<invalid>' (common model_config.cc).
    consequence = (
        f"refuses every request: \"inference input '{tensor}' data-type is '...', but model '{name}' expects "
        f"'{INVALID_PROTOCOL_NAME}'\""
        if "input" in kind
        else "reports the output's type as that, which no client can read"
    )
    return Finding(
        f"{kind} '{tensor}' has data_type {number}, a number model_config.proto does not name; Triton loads "
        f"it as '{INVALID_PROTOCOL_NAME}' and {consequence}",
        hint="write one of the TYPE_* names (TYPE_FP32, TYPE_INT64, TYPE_STRING ...)",
    )


def _missing_fields(io: ModelInput | ModelOutput) -> list[str]:
    missing = []
    if io.data_type == TYPE_INVALID:
        missing.append("data_type")
    if not io.dims:
        missing.append("dims")
    return missing


def _missing_field_finding(model: ModelEntry, kind: str, tensor: str, field: str, filled: bool) -> Finding:
    message = f"{kind} '{tensor}' must specify '{field}' for {config_name(model)}"
    if filled:
        return Finding(
            f"{kind} '{tensor}' has no '{field}': the {model_backend(model)} backend fills it in from "
            "the model file, so this check needs the model file",
            severity=Severity.INFO,
            hint=f"with --strict (--disable-auto-complete-config) Triton refuses: {message}",
        )
    backend = model_backend(model)
    if backend in ("onnxruntime", "openvino"):
        hint = f"the {backend} backend fills inputs (or outputs) only when the config declares none of them; write the field"
    elif field == "dims":
        hint = "write dims: [ 1 ] with reshape: { shape: [ ] } for one scalar per batch item"
    else:
        hint = None
    return Finding(message, hint=hint)


@rule("RB203", "io-dims-and-reshape", field="dims", quiet="io_plain_shapes")
def check_io_shapes(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Dimensions are integers >= 1 or -1 (variable), and a `reshape` holds the same elements as `dims`.

    Triton's texts: "dimension must be integer >= 1, or -1 to indicate a variable-size dimension",
    "reshape dimensions must be ...", "has different size for dims and reshape" (element counts differ,
    or differ between variable-size dimensions: `[2,4,-1,6]` may become `[8,-1,1,6]`), "has different
    number of variable-size dimensions for dims and reshape", and "cannot have empty reshape for
    non-batching model as scalar tensors are not supported".

    Fails: `dims: [ 1, 3, 2 ] reshape: { shape: [ 5 ] }`. Passes: `reshape: { shape: [ 6 ] }`.
    """
    if model.config is None or io_summary(model).plain_shapes:
        return
    name = config_name(model)
    for kind, io in config_ios(model):
        if not io.name or not io.dims:
            continue  # RB202 reports these
        for problem in io_shape_problems(io, model.config.max_batch_size, kind):
            yield Finding(f"{problem} for {name}")


@rule("RB204", "io-platform-features", field="input", quiet="io_plain_features")
def check_io_features(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Tensor features that only some platforms or shapes allow.

    `format: FORMAT_NHWC/FORMAT_NCHW` needs exactly 3 dims ("model input NHWC/NCHW require 3 dims");
    `is_shape_tensor` and `is_non_linear_format_io` are TensorRT-only ("shape tensors are only supported
    for TensorRT platform", "Non-linear IO format is only supported for the TensorRT platform"), and a
    non-linear tensor needs 3 dims. TensorRT engines have no string type, so `TYPE_STRING` on a
    TensorRT model cannot load.

    Fails: `platform: "onnxruntime_onnx"` with `is_shape_tensor: true`. Passes: the same on `tensorrt_plan`.
    """
    cfg = model.config
    if cfg is None or io_summary(model).plain_features:
        return
    name = config_name(model)
    tensorrt = model_backend(model) == "tensorrt"
    for kind, io in config_ios(model):
        if kind == "model input" and cast("ModelInput", io).format in (FORMAT_NHWC, FORMAT_NCHW) and len(io.dims) != 3:
            yield Finding(
                f"model input NHWC/NCHW require 3 dims for {name}",
                hint=f"input '{io.name}' has {len(io.dims)}",
            )
        if io.is_shape_tensor and not tensorrt:
            yield Finding(
                f"shape tensors are only supported for TensorRT platform for {name}",
                hint=f"{kind} '{io.name}'",
            )
        if io.is_non_linear_format_io:
            if not tensorrt:
                yield Finding(f"Non-linear IO format is only supported for the TensorRT platform for {name}")
            elif len(io.dims) != 3:
                side = "input" if kind == "model input" else "output"
                yield Finding(f"Non-linear IO format {side} requires 3 dims for {name}")
        if tensorrt and io.data_type == TYPE_STRING:
            yield Finding(
                f"{kind} '{io.name}' of TensorRT model {name} is TYPE_STRING, which TensorRT engines cannot carry",
                hint="pass strings through a Python or ONNX Runtime step in an ensemble",
            )


@rule("RB205", "io-duplicate-names", Severity.WARNING, field="input", quiet="io_unique_names")
def check_duplicate_names(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Two inputs (or two outputs) with the same name: Triton keeps the first and ignores the rest.

    Core builds a name-keyed map without checking, so the second declaration is silently dropped; the
    model loads, but not with the config you wrote.

    Fails: two `input` entries named `x`. Passes: names are unique.
    """
    cfg = model.config
    if cfg is None or io_summary(model).unique_names:
        return
    for kind, tensors in (("input", cfg.input), ("output", cfg.output)):
        seen: set[str] = set()
        for io in tensors:
            if io.name and io.name in seen:
                yield Finding(
                    f"model {kind} '{io.name}' is declared more than once; Triton silently uses the first",
                    hint="remove or rename the duplicate",
                )
            seen.add(io.name)


@rule("RB206", "batch-input-output", field="batch_input", sections=("batch_input", "batch_output"))
def check_batch_io(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """`batch_input` / `batch_output` entries name known tensors with the right number of sources.

    Triton (core's ValidateBatchIO): "batch input kind 'K' expects 1 source input, got N", "batch input
    data type must be TYPE_INT32 or TYPE_FP32", "unknown source input name 'X'", "batch output kind 'K'
    expects 1 source input, got N", "unknown target output name 'Y'", "target output name 'Y' can only
    be specified once".

    Fails: `batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_FP32 } ]`.
    Passes: add `source_input: "INPUT"`.
    """
    cfg = model.config
    if cfg is None or not (cfg.batch_input or cfg.batch_output):
        return
    from tritonclient.grpc import model_config_pb2 as pb

    name = config_name(model)
    inputs = {io.name for io in cfg.input}
    outputs = {io.name for io in cfg.output}
    for b in cfg.batch_input:
        kind = enum_name(pb.BatchInput.Kind, b.kind)
        if len(b.source_input) != 1:
            yield Finding(
                f"batch input kind '{kind}' expects 1 source input, got {len(b.source_input)} for {name}"
            )
        if b.data_type not in (pb.TYPE_INT32, pb.TYPE_FP32):
            yield Finding(f"batch input data type must be TYPE_INT32 or TYPE_FP32 for {name}")
        for source in b.source_input:
            if source not in inputs:
                yield Finding(f"unknown source input name '{source}' for {name}")
    for bo in cfg.batch_output:
        yield from _batch_output_problems(bo, enum_name(pb.BatchOutput.Kind, bo.kind), inputs, outputs, name)


def _batch_output_problems(b: BatchOutput, kind: str, inputs: set[str], outputs: set[str], name: str) -> Iterator[Finding]:
    if len(b.source_input) != 1:
        yield Finding(f"batch output kind '{kind}' expects 1 source input, got {len(b.source_input)} for {name}")
    for source in b.source_input:
        if source not in inputs:
            yield Finding(f"unknown source input name '{source}' for {name}")
    targets: set[str] = set()
    for target in b.target_name:
        if target not in outputs:
            yield Finding(f"unknown target output name '{target}' for {name}")
        elif target in targets:
            yield Finding(f"target output name '{target}' can only be specified once for {name}")
        targets.add(target)


@rule("RB207", "label-files", field="label_filename", sections=("output",), quiet="io_no_labels")
def check_label_files(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Each output's `label_filename` exists inside the model folder (beside config.pbtxt).

    Triton opens the labels file when the model initializes and refuses the model when it is missing
    or when its path leaves the model folder ("label file path ... is outside model directory").

    Fails: `label_filename: "labels.txt"` with no `labels.txt` beside config.pbtxt. Passes: the file is there.
    """
    cfg = model.config
    if cfg is None or io_summary(model).no_labels:
        return
    name = config_name(model)
    for io in cfg.output:
        label = io.label_filename
        if not label:
            continue
        path = model.path / label
        if not relative_inside(label):
            yield Finding(
                f"label file path '{path}' for output '{io.name}' in model '{name}' is outside model directory"
            )
            continue
        entry = next((f for f in model.files if f.name == label), None)
        exists = (entry is not None and not entry.is_dir) if "/" not in label else regular_file_size(path, model.path) is not None
        if not exists:
            yield Finding(
                f"label file '{label}' for output '{io.name}' of model '{name}' does not exist in the model folder",
                path=path,
                hint="put the labels file beside config.pbtxt (one label per line) or drop label_filename",
            )



RULES: tuple[Rule, ...] = (
    check_io_required_fields,
    check_io_shapes,
    check_io_features,
    check_duplicate_names,
    check_batch_io,
    check_label_files,
)
