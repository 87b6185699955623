"""Rules RB4xx: platform and backend (core's ``AutoCompleteBackendFields`` and the platform/backend checks
of ``ValidateModelConfig``; the resolution itself is analysis/resolve.py). Model files are in model_files.py.

Whether each finds anything is ``platform_faults``, which the engine's quiet flag asks too; each finds at most
one thing and returns a tuple.
"""

from __future__ import annotations

from repo_builder.validate.analysis.resolve import ENSEMBLE, config_name, platform_faults, resolve_backend
from repo_builder.validate.analysis.versions import misplaced_config_hint
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule


@rule("RB401", "backend-undetermined", quiet="platform_clean")
def check_backend_undetermined(model: ModelEntry, ctx: RuleContext) -> tuple[Finding, ...]:
    """Neither the config nor the files tell Triton which backend runs the model.

    With no ``platform``, ``backend`` or ``default_model_filename``, Triton looks for a known model file
    (``model.plan``, ``model.onnx``, ``model.pt``, ``model.py``, ...) in the lexicographically first
    subfolder of the model only, and otherwise takes the backend from a model name such as
    ``model.identity``. The answer needs the model file: say ``backend:`` in the config to make it certain.

    Fails::

        models/classifier/config.pbtxt   # no platform/backend
        models/classifier/1/             # no model file

    Passes::

        models/classifier/config.pbtxt   # backend: "onnxruntime"
        models/classifier/1/model.onnx
    """
    if "RB401" not in platform_faults(model, ctx):
        return ()
    resolved = resolve_backend(model)
    assert resolved.problem is not None  # RB401's fault
    first = resolved.first_folder
    misplaced = misplaced_config_hint(model)
    if misplaced:
        hint = misplaced
    elif first is None:
        hint = "needs the model file: add a version folder 1/ with it, or set backend: in config.pbtxt"
    else:
        hint = (
            f"needs the model file: Triton looks only in '{first}/' (the first subfolder by name); "
            "put model.onnx / model.plan / model.py there, or set backend: in config.pbtxt"
        )
    return (Finding(resolved.problem, hint=hint),)


@rule("RB402", "platform-unknown", field="platform", quiet="platform_clean")
def check_platform_unknown(model: ModelEntry, ctx: RuleContext) -> tuple[Finding, ...]:
    """The config names a platform (or model file name) from which no backend follows.

    Triton maps ``tensorrt_plan``, ``onnxruntime_onnx``, ``pytorch_libtorch``, ``tensorflow_graphdef``
    and ``tensorflow_savedmodel`` to their backends; ``ensemble`` needs none. Any other platform
    without a ``backend`` is refused.

    Fails: ``platform: "onnx"``

    Passes: ``platform: "onnxruntime_onnx"`` or ``backend: "onnxruntime"``
    """
    if "RB402" not in platform_faults(model, ctx):
        return ()
    return (
        Finding(
            f"unexpected platform type '{resolve_backend(model).platform}' for {config_name(model)}",
            hint="use a known platform (tensorrt_plan, onnxruntime_onnx, pytorch_libtorch, ensemble) or set backend:",
        ),
    )


@rule("RB403", "platform-backend-mismatch", field="backend", quiet="platform_clean")
def check_platform_backend_mismatch(model: ModelEntry, ctx: RuleContext) -> tuple[Finding, ...]:
    """``platform`` and ``backend`` name different runtimes, or an ensemble names a backend.

    Triton accepts any platform with a backend it does not know by name, but for tensorrt, onnxruntime,
    pytorch and tensorflow the two must agree.

    Fails: ``platform: "tensorrt_plan"`` with ``backend: "onnxruntime"``

    Passes: ``platform: "onnxruntime_onnx"`` with ``backend: "onnxruntime"``
    """
    if "RB403" not in platform_faults(model, ctx):
        return ()
    resolved = resolve_backend(model)
    p, b = resolved.platform, resolved.backend
    if p == ENSEMBLE:
        return (
            Finding(
                f"Ensemble model '{config_name(model)}' must have platform type '{p}' and empty backend type",
                hint="remove the backend: line",
            ),
        )
    return (
        Finding(
            f"unexpected 'platform' and 'backend' pair, got:{p}, {b}",
            hint="remove platform: and keep backend:, or make them name the same runtime",
        ),
    )


@rule("RB404", "backend-not-standard", Severity.WARNING, field="backend", quiet="platform_clean")
def check_backend_not_standard(model: ModelEntry, ctx: RuleContext) -> tuple[Finding, ...]:
    """The backend is not one shipped in NVIDIA's Triton containers.

    A custom backend loads only if its library is installed in Triton's backend folder. When the name
    came from the model folder's name (``model.<backend>``, because the config says nothing) it is
    almost always a mistake and is an error.

    Fails: a folder ``my.model`` without a config (backend ``model`` is looked for).

    Passes: ``backend: "python"``
    """
    if "RB404" not in platform_faults(model, ctx):
        return ()
    resolved = resolve_backend(model)
    b = resolved.backend
    from_name = resolved.detected_from is not None and resolved.detected_from.startswith("the model name")
    return (
        Finding(
            f"unable to find backend library for backend '{b}', try specifying runtime on the model configuration.",
            severity=Severity.ERROR if from_name else None,
            hint=(
                f"the backend was taken from {resolved.detected_from}; set backend: in config.pbtxt"
                if from_name
                else f"install the '{b}' backend in Triton's backends folder, or fix the backend name"
            ),
        ),
    )


RULES: tuple[Rule, ...] = (
    check_backend_undetermined,
    check_platform_unknown,
    check_platform_backend_mismatch,
    check_backend_not_standard,
)
