"""Rules RB2xx: the config text itself and its tensors (core's ``ValidateModelIOConfig`` and friends).

Triton checks inputs and outputs when the config is read if auto-complete is off, and only after the
backend has filled in what it reads from the model file if auto-complete is on (the default). So a
missing ``data_type`` or ``dims`` is an error under ``--strict`` or for a backend that fills in nothing,
and otherwise a note that the answer needs the model file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath

from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule
from repo_builder.validate.rules.layout import version_folder, versions_to_load
from repo_builder.validate.rules.platform import MAX_PYTHON_BYTES, _top_level_names, resolve_backend

WILDCARD = -1
TYPE_INVALID = 0
TYPE_STRING = 13
FORMAT_NHWC, FORMAT_NCHW = 1, 2
WARMUP_FOLDER = "warmup"

# Backends whose auto-complete fills inputs and outputs from the model file.
AUTOCOMPLETE_IO_BACKENDS = frozenset({"onnxruntime", "tensorrt", "openvino", "tensorflow"})


def config_name(model: ModelEntry) -> str:
    """The name Triton uses in its messages: the config's, else the folder's (auto-complete sets it)."""
    return (model.config.name if model.config is not None else "") or model.name


def model_backend(model: ModelEntry) -> str:
    """The backend Triton resolves for the model ('' if none): RB4xx's reading of core's auto-complete."""
    return resolve_backend(model).backend


def _python_autocompletes(path: Path) -> bool:
    """Whether a model.py may define ``auto_complete_config`` (read with ``ast``, never imported)."""
    try:
        st = path.stat()
    except (OSError, ValueError):
        return True  # unreadable: assume it might fill things in; RB4xx reports the file itself
    if st.st_size > MAX_PYTHON_BYTES:
        return True
    return _mentions_autocomplete(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=4096)
def _mentions_autocomplete(path: Path, mtime_ns: int, size: int) -> bool:
    try:
        return python_defines_autocomplete(path.read_bytes())
    except (OSError, ValueError):
        return True


@lru_cache(maxsize=512)
def python_defines_autocomplete(source: bytes) -> bool:
    """Whether the Python backend's stub can call ``TritonPythonModel.auto_complete_config`` (static or not).

    The stub calls it only when the class has it; without it the config stays as written (no inputs or
    outputs when there is no config). True whenever the source leaves room for doubt: it does not
    parse, the class has bases or decorators, is not a plain class statement, or the name
    ``auto_complete_config`` is bound or named anywhere else in the file.
    """
    import ast  # only Python models need it

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return True  # RB407 refuses the file; no answer here
    _, classes, _ = _top_level_names(tree.body)
    cls = classes.get("TritonPythonModel")
    if cls is None or cls.bases or cls.keywords or cls.decorator_list:
        return True
    name = "auto_complete_config"
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return True
        if isinstance(node, ast.Name | ast.Attribute) and name in (getattr(node, "id", None), getattr(node, "attr", None)):
            return True
        if isinstance(node, ast.Constant) and node.value == name:  # setattr(..., "auto_complete_config", ...)
            return True
    return False


def python_io_autocompleted(model: ModelEntry) -> bool:
    """Whether the model.py of a version Triton loads defines ``auto_complete_config`` (the Python
    backend runs it per loaded version, from ``<version>/<default_model_filename>``)."""
    filename = resolve_backend(model).default_model_filename or "model.py"
    numbers = versions_to_load(model)
    if not numbers:
        return True  # nothing loads (RB110): no answer
    for number in numbers:
        folder = version_folder(model, number)
        entry = folder.entry(filename) if folder is not None else None
        if entry is None or entry.is_dir:
            continue  # RB405 refuses the version
        if _python_autocompletes(folder.path / filename):
            return True
    return False


def backend_fills_io(model: ModelEntry) -> bool:
    """True when auto-complete lets the backend fill in inputs/outputs from the model file, config or not:
    ONNX Runtime, TensorRT, OpenVINO, TensorFlow, or a Python model with ``auto_complete_config``."""
    backend = model_backend(model)
    if backend in AUTOCOMPLETE_IO_BACKENDS:
        return True
    return backend == "python" and python_io_autocompleted(model)


def io_autocompleted(model: ModelEntry, ctx: RuleContext) -> bool:
    """True when Triton lets the backend fill in inputs/outputs from the model file before checking."""
    if ctx.options.strict or model.config is None:
        return False
    return backend_fills_io(model)


def element_count(dims: Sequence[int]) -> int:
    """Element count, or -1 when any dimension is variable (core's GetElementCount)."""
    if any(d == WILDCARD for d in dims):
        return WILDCARD
    return math.prod(dims)


def _chunks(dims: Sequence[int]) -> list[int]:
    """Element counts of the runs between variable-size dimensions."""
    out, current = [], 1
    for d in dims:
        if d == WILDCARD:
            out.append(current)
            current = 1
        else:
            current *= d
    out.append(current)
    return out


def io_shape_problems(io: object, max_batch_size: int, kind: str) -> Iterator[str]:
    """Core's ValidateIOShape for one input or output, minus the data_type/dims presence checks."""
    has_reshape = io.HasField("reshape")
    if not has_reshape and min(io.dims, default=1) >= 1:  # the common case, decided cheaply
        return
    prefix = f"{kind} '{io.name}' "
    reshape = list(io.reshape.shape)
    if has_reshape and not reshape and max_batch_size == 0:
        yield prefix + "cannot have empty reshape for non-batching model as scalar tensors are not supported"
        return
    if any(d < 1 and d != WILDCARD for d in io.dims):
        yield prefix + "dimension must be integer >= 1, or -1 to indicate a variable-size dimension"
        return
    if not has_reshape:
        return
    if any(d < 1 and d != WILDCARD for d in reshape):
        yield prefix + "reshape dimensions must be integer >= 1, or -1 to indicate a variable-size dimension"
        return
    # Core treats an empty reshape as a scalar: allowed only where dims hold exactly one element.
    dims_size, reshape_size = element_count(io.dims), (element_count(reshape) if reshape else 0)
    if dims_size != reshape_size and (reshape_size != 0 or dims_size != 1):
        yield prefix + "has different size for dims and reshape"
        return
    if dims_size == WILDCARD:
        a, b = _chunks(io.dims), _chunks(reshape)
        if len(a) != len(b):
            yield prefix + "has different number of variable-size dimensions for dims and reshape"
        elif a != b:
            yield prefix + "has different size for dims and reshape"


def _ios(model: ModelEntry) -> tuple[tuple[str, object], ...]:
    """("model input" | "model output", tensor) pairs, kept on the entry: walking a proto's repeated
    fields is slow, and several rules walk them for every model."""
    ios = model.facts.get(_ios)
    if ios is None:
        cfg = model.config
        ios = model.facts[_ios] = (
            *(("model input", io) for io in cfg.input),
            *(("model output", io) for io in cfg.output),
        )
    return ios


@rule("RB201", "config-parses")
def check_config_parses(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """`config.pbtxt` must parse with Triton's own `ModelConfig` proto (text format).

    Triton reads the file with protobuf's text parser: a misspelt or unknown field, a value of the wrong
    type, two members of one `oneof` (say `dynamic_batching` and `sequence_batching`), a file that is not
    UTF-8 text or is a folder all make the model fail to load. The diagnostic carries the line and column
    the parser stopped at.

    Fails: `max_batch_sise: 8` (unknown field). Passes: `max_batch_size: 8`.
    """
    if model.config_problem is not None:
        yield Finding(
            model.config_problem,
            hint="field names and enum values are those of Triton's model_config.proto",
            line=model.config_line,
            column=model.config_column,
        )


@rule("RB202", "io-data-type-and-dims")
def check_io_required_fields(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Every input and output needs a `name`, a `data_type` and non-empty `dims`.

    Triton: "model input 'X' must specify 'data_type'", "... must specify 'dims'". With auto-complete
    on (Triton's default), backends that read the model file (ONNX Runtime, TensorRT, OpenVINO,
    TensorFlow, a Python model with `auto_complete_config`) fill these in first, so the answer needs the
    model file and this rule only notes it; under `--strict` it is an error. A scalar per batch item is
    written `dims: [ 1 ]` with `reshape: { shape: [ ] }`: empty `dims` are never accepted.

    Fails (strict): `input [ { name: "x" dims: [ 3 ] } ]`. Passes: add `data_type: TYPE_FP32`.
    """
    if model.config is None:
        return
    name = config_name(model)
    filled: bool | None = None  # asked only when something is missing: it may read model.py
    for kind, io in _ios(model):
        if not io.name:
            yield Finding(f"{kind} must specify 'name' for {name}")
            continue
        missing = []
        if io.data_type == TYPE_INVALID:
            missing.append("data_type")
        if not io.dims:
            missing.append("dims")
        for field in missing:
            message = f"{kind} '{io.name}' must specify '{field}' for {name}"
            if filled is None:
                filled = io_autocompleted(model, ctx)
            if filled:
                yield Finding(
                    f"{kind} '{io.name}' has no '{field}': the {model_backend(model)} backend fills it in from "
                    "the model file, so this check needs the model file",
                    severity=Severity.INFO,
                    hint=f"with --strict (--disable-auto-complete-config) Triton refuses: {message}",
                )
            else:
                hint = (
                    "write dims: [ 1 ] with reshape: { shape: [ ] } for one scalar per batch item"
                    if field == "dims"
                    else None
                )
                yield Finding(message, hint=hint)


@rule("RB203", "io-dims-and-reshape")
def check_io_shapes(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Dimensions are integers >= 1 or -1 (variable), and a `reshape` holds the same elements as `dims`.

    Triton's texts: "dimension must be integer >= 1, or -1 to indicate a variable-size dimension",
    "reshape dimensions must be ...", "has different size for dims and reshape" (element counts differ,
    or differ between variable-size dimensions: `[2,4,-1,6]` may become `[8,-1,1,6]`), "has different
    number of variable-size dimensions for dims and reshape", and "cannot have empty reshape for
    non-batching model as scalar tensors are not supported".

    Fails: `dims: [ 1, 3, 2 ] reshape: { shape: [ 5 ] }`. Passes: `reshape: { shape: [ 6 ] }`.
    """
    if model.config is None:
        return
    name = config_name(model)
    for kind, io in _ios(model):
        if not io.name or not io.dims:
            continue  # RB202 reports these
        for problem in io_shape_problems(io, model.config.max_batch_size, kind):
            yield Finding(f"{problem} for {name}")


@rule("RB204", "io-platform-features")
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
    if cfg is None:
        return
    name = config_name(model)
    tensorrt = model_backend(model) == "tensorrt"
    for kind, io in _ios(model):
        if kind == "model input" and io.format in (FORMAT_NHWC, FORMAT_NCHW) and len(io.dims) != 3:
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


@rule("RB205", "io-duplicate-names", Severity.WARNING)
def check_duplicate_names(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Two inputs (or two outputs) with the same name: Triton keeps the first and ignores the rest.

    Core builds a name-keyed map without checking, so the second declaration is silently dropped; the
    model loads, but not with the config you wrote.

    Fails: two `input` entries named `x`. Passes: names are unique.
    """
    cfg = model.config
    if cfg is None:
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


@rule("RB206", "batch-input-output")
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
        kind = pb.BatchInput.Kind.Name(b.kind)
        if len(b.source_input) != 1:
            yield Finding(
                f"batch input kind '{kind}' expects 1 source input, got {len(b.source_input)} for {name}"
            )
        if b.data_type not in (pb.TYPE_INT32, pb.TYPE_FP32):
            yield Finding(f"batch input data type must be TYPE_INT32 or TYPE_FP32 for {name}")
        for source in b.source_input:
            if source not in inputs:
                yield Finding(f"unknown source input name '{source}' for {name}")
    for b in cfg.batch_output:
        kind = pb.BatchOutput.Kind.Name(b.kind)
        if len(b.source_input) != 1:
            yield Finding(
                f"batch output kind '{kind}' expects 1 source input, got {len(b.source_input)} for {name}"
            )
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


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a NUL byte in a config string, a name too long ...
        return False


def _inside(relative: str) -> bool:
    """A relative path that never climbs above its starting folder."""
    parts = PurePosixPath(relative).parts
    if PurePosixPath(relative).is_absolute():
        return False
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return True


@rule("RB207", "label-files")
def check_label_files(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Each output's `label_filename` exists inside the model folder (beside config.pbtxt).

    Triton opens the labels file when the model initializes and refuses the model when it is missing
    or when its path leaves the model folder ("label file path ... is outside model directory").

    Fails: `label_filename: "labels.txt"` with no `labels.txt` beside config.pbtxt. Passes: the file is there.
    """
    cfg = model.config
    if cfg is None:
        return
    name = config_name(model)
    for io in cfg.output:
        label = io.label_filename
        if not label:
            continue
        path = model.path / label
        if not _inside(label):
            yield Finding(
                f"label file path '{path}' for output '{io.name}' in model '{name}' is outside model directory"
            )
            continue
        entry = next((f for f in model.files if f.name == label), None)
        exists = (entry is not None and not entry.is_dir) if "/" not in label else _is_file(path)
        if not exists:
            yield Finding(
                f"label file '{label}' for output '{io.name}' of model '{name}' does not exist in the model folder",
                path=path,
                hint="put the labels file beside config.pbtxt (one label per line) or drop label_filename",
            )


def _warmup_file_size(model: ModelEntry, warmup_dir: object, filename: str) -> int | None:
    """Size of a file in the model's warmup/ folder from the scan (a nested path is looked up directly)."""
    if warmup_dir is None or not filename:
        return None
    if "/" not in filename:
        entry = warmup_dir.entry(filename)
        return entry.size if entry is not None and not entry.is_dir else None
    target = model.path / WARMUP_FOLDER / filename
    return target.stat().st_size if _inside(filename) and _is_file(target) else None


def warmup_input_count_problem(model_name: str, declared: Sequence[object], fed: Iterable[str]) -> str | None:
    """Core's input count check (``InferenceRequest::Normalize``) on a warmup request, or None.

    Only warmup inputs that are model inputs count (others become override inputs); the request fails
    when required (non-optional) inputs are missing. Texts as core writes them: names quoted, joined
    by ',' without spaces.
    """
    names = {io.name for io in declared}
    given = [n for n in fed if n in names]
    required = sum(1 for io in declared if not io.optional)
    if len(given) >= required:  # warmup names are map keys: never more than the declared inputs
        return None
    missing = [io.name for io in declared if not io.optional and io.name not in given]
    got = "[" + ",".join(f"'{n}'" for n in given) + "]"
    lacking = "[" + ",".join(f"'{n}'" for n in missing) + "]"
    expected = (
        f"expected {len(declared)} inputs"
        if required == len(declared)
        else f"expected number of inputs between {required} and {len(declared)}"
    )
    return (
        f"{expected} but got {len(given)} inputs for model '{model_name}'. Got input(s) {got}, "
        f"but missing required input(s) {lacking}. Please provide all required input(s)."
    )


def _dims_text(dims: Iterable[int]) -> str:
    """Core's DimsListToString: ``[-1,4]``."""
    return "[" + ",".join(str(d) for d in dims) + "]"


def _protocol_name(data_type: int) -> str:
    """Core's DataTypeToProtocolString (``TYPE_STRING`` -> ``BYTES``)."""
    from tritonclient.grpc import model_config_pb2 as pb

    from repo_builder import dtypes

    name = pb.DataType.Name(data_type)
    return next((d.wire for d in dtypes.DTYPES if d.triton == name), name.removeprefix("TYPE_"))


def warmup_request_problem(
    model_name: str, max_batch_size: int, input_name: str, spec: object, declared: object
) -> str | None:
    """Core's per-input checks (``InferenceRequest::Normalize``) on one warmup input fed to model input
    ``declared``, or None: data type first, then dims.

    Triton builds each warmup request with batch 1 (prepended to the warmup dims when the model batches)
    and compares the dims without it to the config's ``dims`` (not ``reshape``); ``-1`` matches any size.
    """
    if TYPE_INVALID not in (spec.data_type, declared.data_type) and spec.data_type != declared.data_type:
        return (
            f"inference input '{input_name}' data-type is '{_protocol_name(spec.data_type)}', "
            f"but model '{model_name}' expects '{_protocol_name(declared.data_type)}'"
        )
    want, got = list(declared.dims), list(spec.dims)
    if not want or WILDCARD in got or (declared.is_shape_tensor and max_batch_size > 0):
        return None  # other checks refuse these first; batched shape tensors keep their batch dim
    if len(want) == len(got) and all(w in (WILDCARD, g) for w, g in zip(want, got, strict=True)):
        return None
    batched = max_batch_size > 0
    expected = _dims_text(([WILDCARD] if batched else []) + want)
    shape = _dims_text(([1] if batched else []) + got)
    text = f"unexpected shape for input '{input_name}' for model '{model_name}'. Expected {expected}, got {shape}."
    if batched:
        text += (
            " NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
            "prepended to each input shape. If you want to specify the full shape including the batch dim in "
            "your input dims config, try setting max_batch_size to zero. See the model configuration docs for "
            "more info on max_batch_size."
        )
    return text


@rule("RB208", "model-warmup")
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
    from tritonclient.grpc import model_config_pb2 as pb

    from repo_builder import dtypes

    inputs = {io.name: io for io in cfg.input}
    controls = {c.name for c in cfg.sequence_batching.control_input} | {
        s.input_name for s in cfg.sequence_batching.state
    }
    warmup_dir = next((v for v in model.versions if v.name == WARMUP_FOLDER), None)
    inputs_final = not io_autocompleted(model, ctx)  # else the model file adds inputs
    for sample in cfg.model_warmup:
        if sample.batch_size == 0:
            continue  # Triton skips the sample ("Skipping batch 0 warmup sample")
        if inputs_final:
            problem = warmup_input_count_problem(config_name(model), cfg.input, sample.inputs)
            if problem is not None:
                yield Finding(
                    problem,
                    hint=f"warmup sample '{sample.name}' must feed every required input "
                    "(the ones without optional: true) by its name in the config",
                )
        for input_name, spec in sample.inputs.items():
            which = spec.WhichOneof("input_data_type")
            if which is None:
                yield Finding(f"warmup setting expects input '{input_name}' to have input_data_type set")
            if spec.data_type == TYPE_INVALID:
                yield Finding(f"warmup sample '{sample.name}' input '{input_name}' must specify 'data_type'")
            if any(d == WILDCARD for d in spec.dims):
                yield Finding(
                    f"warmup setting expects all variable-size dimensions are specified for input '{input_name}'"
                )
            declared = inputs.get(input_name)
            if declared is None and input_name not in controls:
                yield Finding(
                    f"warmup sample '{sample.name}' feeds '{input_name}', which is not an input of the model",
                    severity=Severity.WARNING,
                    hint="Triton passes it as an extra (override) input and does not count it as a model input"
                    + (f"; the model's inputs: {', '.join(inputs) or 'none'}" if inputs_final else ""),
                )
            elif declared is not None:
                problem = warmup_request_problem(config_name(model), cfg.max_batch_size, input_name, spec, declared)
                if problem is not None:
                    yield Finding(
                        problem,
                        hint=f"give '{input_name}' in warmup sample '{sample.name}' the input's data_type "
                        f"({pb.DataType.Name(declared.data_type)}) and dims {_dims_text(declared.dims)} with "
                        "each -1 set" + (", without the batch dimension" if cfg.max_batch_size > 0 else ""),
                    )
            if which != "input_data_file":
                continue
            filename = spec.input_data_file
            size = _warmup_file_size(model, warmup_dir, filename)
            if size is None:
                yield Finding(
                    f"warmup data file '{filename}' for input '{input_name}' does not exist in "
                    f"{model.name}/{WARMUP_FOLDER}/",
                    path=model.path / WARMUP_FOLDER / filename,
                )
                continue
            dtype = pb.DataType.Name(spec.data_type)
            if spec.data_type in (TYPE_INVALID, TYPE_STRING) or any(d == WILDCARD for d in spec.dims):
                continue
            itemsize = next((d.size for d in dtypes.DTYPES if d.triton == dtype), None)
            if itemsize is None:
                continue
            needed = itemsize * math.prod(spec.dims)
            if size < needed:
                yield Finding(
                    # Triton's text has no space before "only" (core's backend_model_instance.cc)
                    f"warmup setting expects {needed} bytes, but the data provided from {filename}only has {size} bytes",
                    hint=f"'{filename}' must hold at least one sample: {needed} bytes of raw {dtype} values",
                    path=model.path / WARMUP_FOLDER / filename,
                )


@rule("RB209", "model-metrics")
def check_model_metrics(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Per-model metric settings (`model_metrics`) are complete.

    Triton (core's ValidateModelMetrics): "metric control must specify 'metric_identifier'", "metric
    identifier must specify non-empty 'family'", "metric control must specify 'histogram_options'",
    "histogram options must specify non-empty 'buckets'".

    Fails: `model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" }
    histogram_options { } } ] }`. Passes: `histogram_options { buckets: [ 1, 10, 100 ] }`.
    """
    cfg = model.config
    if cfg is None or not cfg.HasField("model_metrics"):
        return
    for control in cfg.model_metrics.metric_control:
        if not control.HasField("metric_identifier"):
            yield Finding("metric control must specify 'metric_identifier'")
        elif not control.metric_identifier.family:
            yield Finding("metric identifier must specify non-empty 'family'")
        elif not control.HasField("histogram_options"):
            yield Finding("metric control must specify 'histogram_options'")
        elif not control.histogram_options.buckets:
            yield Finding("histogram options must specify non-empty 'buckets'")


RULES: tuple[Rule, ...] = (
    check_config_parses,
    check_io_required_fields,
    check_io_shapes,
    check_io_features,
    check_duplicate_names,
    check_batch_io,
    check_label_files,
    check_model_warmup,
    check_model_metrics,
)
