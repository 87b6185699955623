"""Rules RB6xx: an ONNX Runtime model's config against the ONNX graph, as Triton's ONNX Runtime backend checks.

The graph is read by repo_builder/onnx_io.py (weights never parsed), compared by analysis/onnx_compare.py;
every finding of a model is computed once (analysis/onnx_model.py) and each rule reports its own code.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from repo_builder.validate.analysis.onnx_model import check_onnx_model, onnx_filename
from repo_builder.validate.analysis.resolve import model_backend
from repo_builder.validate.analysis.server_paths import judge_server_path
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule


def _findings(code: str, model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    # A plain function, not a generator: for the usual model with no ONNX problem it returns () at once.
    every = check_onnx_model(model, ctx)
    if not every:
        return ()
    return [
        Finding(p.message, path=checked.path if code == "RB601" else None, hint=p.hint, version=checked.version,
                severity=p.severity)
        for checked in every for p in checked.problems if p.code == code
    ]


@rule("RB601", "onnx-model-unreadable", quiet="onnx_clean")
def check_onnx_unreadable(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """The ONNX file cannot be read as an ONNX model, or its external weights are missing.

    ONNX Runtime fails to create a session from a damaged or truncated file, a file that is not ONNX, or a
    model whose initializers point at external data files that are not beside it. External data paths
    that are absolute or leave the model folder (``../../etc/passwd``) are refused, as onnxruntime and
    ``onnx.checker`` refuse them, and never followed.

    Fails: ``1/model.onnx`` holding an HTML error page saved by a failed download.

    Passes: ``1/model.onnx`` written by ``torch.onnx.export`` (and its ``.data`` file beside it).
    """
    return _findings("RB601", model, ctx)


@rule("RB602", "onnx-input-count", field="input", quiet="onnx_clean")
def check_onnx_input_count(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """The config declares a different number of inputs than the graph requires.

    The backend counts the config's inputs (without optional ones, plus batch inputs and sequence
    control/state inputs) against the graph's inputs that are not initializers.

    Fails: a config with ``INPUT0`` only for a graph with ``INPUT0`` and ``INPUT1``.

    Passes: a config declaring both.
    """
    return _findings("RB602", model, ctx)


@rule("RB603", "onnx-tensor-unknown", field="input", quiet="onnx_clean")
def check_onnx_tensor_unknown(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A config input or output has a name the ONNX graph does not have.

    Fails: ``input [{ name: "input" ... }]`` for a graph whose input is ``input_ids``.

    Passes: ``name: "input_ids"``.
    """
    return _findings("RB603", model, ctx)


@rule("RB604", "onnx-dtype-mismatch", field="data_type", quiet="onnx_clean")
def check_onnx_dtype_mismatch(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A config tensor's ``data_type`` differs from the graph's element type.

    Fails: ``data_type: TYPE_FP32`` for an ``int64`` graph input.

    Passes: ``data_type: TYPE_INT64``.
    """
    return _findings("RB604", model, ctx)


@rule("RB605", "onnx-dims-mismatch", field="dims", quiet="onnx_clean")
def check_onnx_dims_mismatch(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A config tensor's ``dims`` (or ``reshape``) do not fit the graph's shape.

    With ``max_batch_size > 0`` the graph's first dimension must be dynamic (the batch) and ``dims`` give
    the rest; with ``max_batch_size: 0`` ``dims`` give the whole shape. A dynamic graph dimension accepts
    any input size; outputs must match exactly (``-1`` where the graph is dynamic). A scalar graph
    tensor is ``dims: [1]``; a ragged input must be ``[-1]`` in the graph.

    Fails: ``max_batch_size: 8`` and ``dims: [1, 16]`` for a graph input of shape ``[batch, 16]``.

    Passes: ``max_batch_size: 8`` and ``dims: [16]``.
    """
    return _findings("RB605", model, ctx)


@rule("RB606", "onnx-batching-unsupported", field="max_batch_size", quiet="onnx_clean")
def check_onnx_batching_unsupported(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """The config asks for batching the graph cannot do.

    While auto-completing a config that lacks inputs or outputs, the backend refuses a non-zero
    ``max_batch_size`` when not every graph input and output has a dynamic first dimension; and it
    never accepts ``optional`` inputs on a batching model.

    Fails: ``max_batch_size: 8`` with no ``output`` section, for a graph with fixed shapes ``[16]``.

    Passes: ``max_batch_size: 0``.
    """
    return _findings("RB606", model, ctx)


@rule("RB607", "onnx-max-batch-size-autofilled", Severity.WARNING, field="max_batch_size", quiet="onnx_clean")
def check_onnx_max_batch_size_autofilled(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """Auto-complete will set ``max_batch_size`` to 4 behind your back.

    When the config lacks inputs or outputs, ``max_batch_size`` is 0 and every graph tensor has a
    dynamic first dimension, the backend turns batching on with Triton's default maximum of 4 (and adds
    dynamic batching), so the served model differs from the config you wrote.

    Fails: ``max_batch_size: 0`` and no ``output`` for a graph with shapes ``[batch, 16]``.

    Passes: ``max_batch_size: 8`` written explicitly, or inputs and outputs both declared.
    """
    return _findings("RB607", model, ctx)


# Backends that register model_operations libraries (onnxruntime.cc RegisterCustomOpsLibrary, tensorflow TF_LoadLibrary).
_OP_LIBRARY_BACKENDS = ("onnxruntime", "tensorflow")


# A parsed config without model_operations finds nothing here (the first line returns): the engine skips the call.
@rule("RB608", "onnx-op-library", field="model_operations", sections=("model_operations",))
def check_onnx_op_library(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A ``model_operations { op_library_filename }`` library is not where the server will look for it.

    Triton's ONNX Runtime backend hands each ``op_library_filename`` to ONNX Runtime's
    ``RegisterCustomOpsLibrary`` exactly as written, before it creates the session (``src/onnxruntime.cc``);
    that is ``dlopen``: an absolute path is opened as is, a path with a slash is taken from the server's
    working folder (never the model folder), a bare file name is searched on the library path. A library
    that is missing fails the load ("Failed to load library"), and a model using its ops (onnxruntime-extensions'
    tokenizer: ``repo-builder build text-embedder --preprocess onnx``) cannot load without it.

    An absolute path is judged as the target's server sees it, never by looking on this machine (a library
    that exists here proves nothing about the server): a path into this machine's copy of the repository, its
    home, a temporary or project folder or a virtual environment's ``site-packages`` is the build machine's,
    and an error; so is one made for another Python than the image's (``python3.11/``,
    ``.cpython-311-...so``). Inside the image's system Python (``/usr/local/lib/python3.12/dist-packages/M/``)
    it passes when the target image has the module ``M`` (with ``--step-packages dockerfile``: when the
    repository's Dockerfile installs it) and fails when it does not. Elsewhere in the image's folders
    (``/opt``, ``/usr``, ``/lib``) validate cannot see and warns; a path naming this model's own file under
    a mount point (``/models/m/1/lib.so``) warns that it loads only where the repository is mounted there.
    The image is ``--triton-release``'s, else the one ``repo-builder.json`` records. A bare file name is
    warned about too; ``validate --live`` loads it for real through the ONNX Runtime stand-in.

    Fails: ``op_library_filename: "1/libortextensions.so"`` (relative to the server's working folder), or
    ``"/home/me/.venv/lib/python3.11/site-packages/onnxruntime_extensions/_extensions_pydll.cpython-311-x86_64-linux-gnu.so"``
    (the build machine's).

    Passes: ``"/usr/local/lib/python3.12/dist-packages/onnxruntime_extensions/_extensions_pydll.cpython-312-x86_64-linux-gnu.so"``
    for a repository built with ``--step-packages dockerfile`` for 24.12, whose Dockerfile installs
    onnxruntime-extensions there.
    """
    if model.config is None or not model.config.HasField("model_operations"):
        return
    backend = model_backend(model)
    if backend not in _OP_LIBRARY_BACKENDS:
        yield Finding(f"model_operations is ignored by the {backend or 'unknown'} backend; it loads no op library",
                      hint="remove model_operations, or serve the model on the onnxruntime backend",
                      severity=Severity.WARNING)
        return
    for library in model.config.model_operations.op_library_filename:
        if not library:
            yield Finding("model_operations.op_library_filename is empty", hint="give the library's absolute path")
        elif "/" not in library:
            yield Finding(f"op library '{library}' is searched on the server's library path (LD_LIBRARY_PATH), which "
                          "validate cannot see", hint="give an absolute path so validate can check it",
                          severity=Severity.WARNING)
        elif not library.startswith("/"):
            yield Finding(f"op library '{library}' is relative: ONNX Runtime opens it from the server's working folder, "
                          "not from the model folder", hint="give the library's absolute path on the server")
        else:
            yield from _absolute_library(library, model, ctx)


_LIBRARY_HINT = (
    "ONNX Runtime opens op_library_filename as written on the server, never from the model folder: name the path "
    "where the target image has the library; for onnxruntime-extensions build an image that installs it "
    "(repo-builder build ... --preprocess onnx --step-packages dockerfile writes that Dockerfile and names the "
    "library's path in it), or pass --op-library PATH where your servers have it"
)


def _absolute_library(library: str, model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    options = ctx.options
    verdict = judge_server_path(library, model, ctx.repository.root, options.deploy, options.image_provides)
    if verdict is not None:
        yield Finding(f"op library '{library}' {verdict.reason}", hint=_LIBRARY_HINT, severity=verdict.severity)


def applies(model: ModelEntry, ctx: RuleContext) -> bool:
    """Whether a rule of GATED can find anything: every one reads ``check_onnx_model``, which is
    empty unless the model runs on ONNX Runtime (the engine skips the rest for other models)."""
    return onnx_filename(model, ctx) is not None


RULES: tuple[Rule, ...] = (
    check_onnx_unreadable,
    check_onnx_input_count,
    check_onnx_tensor_unknown,
    check_onnx_dtype_mismatch,
    check_onnx_dims_mismatch,
    check_onnx_batching_unsupported,
    check_onnx_max_batch_size_autofilled,
    check_onnx_op_library,
)
# RB608 also warns about model_operations on backends that ignore it, so ``applies`` must not skip it.
GATED: tuple[Rule, ...] = tuple(r for r in RULES if r is not check_onnx_op_library)
