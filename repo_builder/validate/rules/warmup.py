"""Rules RB2xx (continued): ``model_warmup`` samples, run by Triton as requests when the model loads."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from repo_builder import dtypes
from repo_builder.validate.analysis.autocomplete import io_autocompleted
from repo_builder.validate.analysis.enums import enum_name
from repo_builder.validate.analysis.files import regular_file_size, relative_inside
from repo_builder.validate.analysis.resolve import config_name
from repo_builder.validate.analysis.shapes import TYPE_INVALID, TYPE_STRING, WILDCARD, dims_text
from repo_builder.validate.analysis.warmup import (
    WARMUP_FOLDER,
    warmup_input_count_problem,
    warmup_request_problem,
)
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, VersionDir, rule

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig, ModelInput, ModelWarmup


def _warmup_file_size(model: ModelEntry, warmup_dir: VersionDir | None, filename: str) -> int | None:
    """Size of a file in the model's warmup/ folder from the scan (a nested path is looked up directly)."""
    if warmup_dir is None or not filename:
        return None
    if "/" not in filename:
        entry = warmup_dir.entry(filename)
        return entry.size if entry is not None and not entry.is_dir else None
    target = model.path / WARMUP_FOLDER / filename
    return regular_file_size(target, model.path) if relative_inside(filename) else None



@rule("RB208", "model-warmup", field="model_warmup", sections=("model_warmup",))
def check_model_warmup(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """`model_warmup` samples Triton can build and run when the model loads.

    Every warmup input needs `zero_data`, `random_data` or `input_data_file` ("warmup setting expects
    input 'X' to have input_data_type set"), fixed dims ("warmup setting expects all variable-size
    dimensions are specified for input 'X'"), a `data_type`, and an `input_data_file` must exist in
    the model's `warmup/` folder with at least as many bytes as one sample needs ("warmup setting
    expects 16 bytes, but the data provided from in.binonly has 8 bytes", Triton's text, space
    missing). A sample must feed every required (non-`optional`) model input by name, else the load
    fails with Triton's "expected N inputs but got M inputs for model 'X'. Got input(s) [...], but
    missing required input(s) [...]. Please provide all required input(s)." (checked when the config's
    inputs are final, not filled in from the model file). Each sample is an inference request, so a
    model input fed with another `data_type` refuses the model ("inference input 'X' data-type is
    'INT32', but model 'M' expects 'FP32'"), and so do `dims` that do not match the input's `dims`
    (`-1` matches any size; not `reshape`; without the batch dimension, which Triton prepends as 1
    when `max_batch_size` > 0): "unexpected shape for input 'X' for model 'M'. Expected [-1,4], got
    [1,3]." (plus Triton's note on the batch dimension). A warmup input that is not a model input
    (and not a sequence control) is passed as an extra input that is neither counted nor checked
    (warning). Samples with `batch_size: 0` (the default) are skipped by Triton.

    Fails: `inputs { key: "x" value { data_type: TYPE_FP32 dims: [ -1 ] zero_data: true } }`,
    `batch_size: 1 inputs { key: "NOPE" ... }` for a model whose only input is `INPUT0`, or
    `batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_INT32 dims: [ 1, 4 ] zero_data: true } }`
    for `INPUT0` declared `TYPE_FP32` with `dims: [ 4 ]`.
    Passes: `batch_size: 1 inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }`.
    """
    cfg = model.config
    if cfg is None or not cfg.model_warmup:
        return
    controls = {c.name for c in cfg.sequence_batching.control_input} | {s.input_name for s in cfg.sequence_batching.state}
    w = _Warmup(
        model=model,
        cfg=cfg,
        inputs={io.name: io for io in cfg.input},
        controls=frozenset(controls),
        folder=next((v for v in model.versions if v.name == WARMUP_FOLDER), None),
        inputs_final=not io_autocompleted(model, ctx),  # else the model file adds inputs
    )
    for sample in cfg.model_warmup:
        if sample.batch_size == 0:
            continue  # Triton skips the sample ("Skipping batch 0 warmup sample")
        if w.inputs_final:
            problem = warmup_input_count_problem(config_name(model), cfg.input, sample.inputs)
            if problem is not None:
                yield Finding(
                    problem,
                    hint=f"warmup sample '{sample.name}' must feed every required input "
                    "(the ones without optional: true) by its name in the config",
                )
        for input_name, spec in sample.inputs.items():
            yield from _input_findings(w, sample.name, input_name, spec)
            if spec.WhichOneof("input_data_type") == "input_data_file":
                yield from _data_file_findings(w, input_name, spec)


@dataclass(frozen=True)
class _Warmup:
    """What every sample of one model is checked against."""

    model: ModelEntry
    cfg: ModelConfig
    inputs: dict[str, ModelInput]
    controls: frozenset[str]
    folder: VersionDir | None
    inputs_final: bool


def _spec_findings(sample: str, input_name: str, spec: ModelWarmup.Input) -> Iterator[Finding]:
    if spec.WhichOneof("input_data_type") is None:
        yield Finding(f"warmup setting expects input '{input_name}' to have input_data_type set")
    if spec.data_type == TYPE_INVALID:
        yield Finding(f"warmup sample '{sample}' input '{input_name}' must specify 'data_type'")
    if any(d == WILDCARD for d in spec.dims):
        yield Finding(f"warmup setting expects all variable-size dimensions are specified for input '{input_name}'")


def _input_findings(w: _Warmup, sample: str, input_name: str, spec: ModelWarmup.Input) -> Iterator[Finding]:
    from tritonclient.grpc import model_config_pb2 as pb  # deferred package: only the protobuf classes

    yield from _spec_findings(sample, input_name, spec)
    declared = w.inputs.get(input_name)
    if declared is None and input_name not in w.controls:
        yield Finding(
            f"warmup sample '{sample}' feeds '{input_name}', which is not an input of the model",
            severity=Severity.WARNING,
            hint="Triton passes it as an extra (override) input and does not count it as a model input"
            + (f"; the model's inputs: {', '.join(w.inputs) or 'none'}" if w.inputs_final else ""),
        )
        return
    if declared is None:
        return
    mbs = w.cfg.max_batch_size
    problem = warmup_request_problem(config_name(w.model), mbs, input_name, spec, declared)
    if problem is not None:
        yield Finding(
            problem,
            hint=f"give '{input_name}' in warmup sample '{sample}' the input's data_type "
            f"({enum_name(pb.DataType, declared.data_type)}) and dims {dims_text(declared.dims)} with "
            "each -1 set" + (", without the batch dimension" if mbs > 0 else ""),
        )


def _data_file_findings(w: _Warmup, input_name: str, spec: ModelWarmup.Input) -> Iterator[Finding]:
    from tritonclient.grpc import model_config_pb2 as pb  # deferred package: only the protobuf classes

    filename = spec.input_data_file
    path = w.model.path / WARMUP_FOLDER / filename
    size = _warmup_file_size(w.model, w.folder, filename)
    if size is None:
        yield Finding(
            f"warmup data file '{filename}' for input '{input_name}' does not exist in {w.model.name}/{WARMUP_FOLDER}/",
            path=path,
        )
        return
    if spec.data_type in (TYPE_INVALID, TYPE_STRING) or any(d == WILDCARD for d in spec.dims):
        return
    dtype = enum_name(pb.DataType, spec.data_type)
    itemsize = next((d.size for d in dtypes.DTYPES if d.triton == dtype), None)
    needed = itemsize * math.prod(spec.dims) if itemsize is not None else 0
    if size < needed:
        yield Finding(
            # Triton's text has no space before "only" (core's backend_model_instance.cc)
            f"warmup setting expects {needed} bytes, but the data provided from {filename}only has {size} bytes",
            hint=f"'{filename}' must hold at least one sample: {needed} bytes of raw {dtype} values",
            path=path,
        )


RULES: tuple[Rule, ...] = (check_model_warmup,)
