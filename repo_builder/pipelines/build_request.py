"""``repo-builder build`` as a library call: a ``BuildRequest`` in, the built repository and its verdict out.

``build()`` checks every option before anything is exported, builds the family's pipeline, then validates
the repository exactly as the ``repo-builder validate`` command it reports would.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo_builder.compile import CompileSettings
from repo_builder.compile.plan import require_build_environment
from repo_builder.deploy_target import DeployTarget, resolve_target
from repo_builder.errors import ToolError, UserError
from repo_builder.export.progress import Phases
from repo_builder.pipelines.assemble import BuildOptions, BuildResult
from repo_builder.pipelines.build_check import CheckOutcome, CheckRequest, choose_check, run_check
from repo_builder.pipelines.dali_step import refuse_without_gpu
from repo_builder.pipelines.nvcf_assets import nvcf_settings
from repo_builder.pipelines.option_files import check_labels_file
from repo_builder.pipelines.registry import Family, build_family, family, prepare_family
from repo_builder.pipelines.request_options import REQUEST_DEFAULTS
from repo_builder.pipelines.runtime import RuntimeChoice, probe_runtime
from repo_builder.pipelines.settings import PipelineSettings
from repo_builder.pipelines.text_tokenizer_onnx import check_target as check_op_library_target
from repo_builder.precision.gate import PrecisionPlan, PrecisionRequest, load_sets
from repo_builder.render.tuning import ModelTuning, step_instances, tune_model_step
from repo_builder.repository.build_target import check_out_folder
from repo_builder.store.urls import names_url

Log = Callable[[str], None]


def _silent(message: str) -> None:
    """Quiet builds drop progress and notes; errors still raise."""


@dataclass(frozen=True)
class BuildRequest:
    """Everything ``build`` needs; the CLI fills it from its options (defaults as its --help shows)."""

    family: str  # a key of pipelines.registry.FAMILIES: resnet50, image-classifier, text-classifier
    out: Path
    params: Mapping[str, Any] = field(default_factory=dict)  # the family's own options by dest (+ from_export)
    # The options' defaults as declared once in request_options.BUILD_OPTIONS (what --help shows).
    name: str | None = REQUEST_DEFAULTS["name"]  # default: the family's
    runtime: str = REQUEST_DEFAULTS["runtime"]
    max_batch_size: int = REQUEST_DEFAULTS["max_batch_size"]
    top_k: int = REQUEST_DEFAULTS["top_k"]
    version: int | None = REQUEST_DEFAULTS["version"]
    force: bool = REQUEST_DEFAULTS["force"]
    templates: Path | None = REQUEST_DEFAULTS["templates"]
    labels: Path | None = REQUEST_DEFAULTS["labels"]
    defer_compile: bool = REQUEST_DEFAULTS["defer_compile"]
    precision: str = REQUEST_DEFAULTS["precision"]
    calibration_data: Path | None = REQUEST_DEFAULTS["calibration_data"]
    calibration_samples: int = REQUEST_DEFAULTS["calibration_samples"]
    accuracy_data: Path | None = REQUEST_DEFAULTS["accuracy_data"]
    min_accuracy: float | None = REQUEST_DEFAULTS["min_accuracy"]
    fallback: str = REQUEST_DEFAULTS["fallback"]
    fallback_limit: float = REQUEST_DEFAULTS["fallback_limit"]
    check_parity: bool = REQUEST_DEFAULTS["check_parity"]
    instances: int | None = REQUEST_DEFAULTS["instances"]
    intra_op_threads: int | None = REQUEST_DEFAULTS["intra_op_threads"]
    step_instances: int | None = REQUEST_DEFAULTS["step_instances"]  # pre/post (Python) steps' instances; None: render.tuning.step_instances
    max_image_pixels: int = REQUEST_DEFAULTS["max_image_pixels"]  # image steps refuse more, from the header
    max_request_bytes: int = REQUEST_DEFAULTS["max_request_bytes"]  # client-facing steps refuse a larger request
    step_memory_mib: int = REQUEST_DEFAULTS["step_memory_mib"]  # per step instance: the worst cases one execution admits
    replace: bool = REQUEST_DEFAULTS["replace"]  # --replace: the ensemble's inputs/outputs may change (repository/build_target.py)
    triton_release: str | None = REQUEST_DEFAULTS["triton_release"]  # None: the newest release the image table knows
    platform: str = REQUEST_DEFAULTS["platform"]
    step_packages: str = REQUEST_DEFAULTS["step_packages"]
    check: CheckRequest = field(default_factory=CheckRequest)


@dataclass(frozen=True)
class BuildOutcome:
    result: BuildResult
    check: CheckOutcome

    @property
    def ok(self) -> bool:
        return self.check.ok

    def to_json(self) -> dict[str, Any]:
        return {**self.result.to_json(), "validation": self.check.to_json()}


def _check_paths(request: BuildRequest) -> None:
    out = Path(request.out)
    if names_url(str(out)):  # an object store URL, also once a Path made s3:// into s3:/
        raise UserError(f"--out {out}: build writes a local folder; build locally, then copy it to the object store")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a folder")
    check_out_folder(out)  # an unrelated folder with the user's own files: refused before any export
    if request.templates is not None and not Path(request.templates).is_dir():
        raise UserError(f"--templates {request.templates}: not a folder; pass a copy of the shipped templates/ folder")
    check_labels_file(request.labels)


def _compile_settings(request: BuildRequest, choice: RuntimeChoice) -> Any:
    if choice.runtime != "tensorrt":
        return None
    settings = CompileSettings(max_batch_size=request.max_batch_size, precision=request.precision)
    if not request.defer_compile:
        # Fail before the export when this machine cannot build a plan, and say how to split the work.
        try:
            require_build_environment(settings.builder)
        except (UserError, ToolError) as exc:  # no GPU/TensorRT here is the machine's limit (exit 3)
            raise type(exc)(f"{exc}; or pass --defer-compile and run 'repo-builder compile-pending' on a GPU machine") from None
    return settings


def build_options(request: BuildRequest, chosen: Family) -> tuple[BuildOptions, ModelTuning]:
    """BuildOptions from the request (every option checked; nothing exported or written yet)."""
    _check_paths(request)
    target = build_target(request)
    check_op_library_target(request.params, target)
    choice = probe_runtime(request.runtime, defer_compile=request.defer_compile)
    tuning = tune_model_step(request.instances, request.intra_op_threads)
    step_count, decode_count = step_instances(request.step_instances, tuning.cores)
    # PipelineSettings checks --name, --max-batch-size and --top-k: the one place they are checked.
    settings = PipelineSettings(
        name=request.name if request.name is not None else chosen.default_name,
        runtime=choice.runtime,
        max_batch_size=request.max_batch_size,
        top_k=request.top_k,
        instance_count=tuning.instance_count,
        intra_op_threads=tuning.intra_op_threads,
        step_instance_count=step_count,
        decode_instance_count=decode_count,
        max_image_pixels=request.max_image_pixels,
        max_request_bytes=request.max_request_bytes,
        step_memory_mib=request.step_memory_mib,
        nvcf=nvcf_settings(request.params, chosen.command, chosen.options),
    )
    precision = precision_plan(request, chosen)  # its data read and checked apart before any export
    options = BuildOptions(
        out=Path(request.out),
        settings=settings,
        version=request.version,
        force=request.force,
        templates=request.templates,
        labels=request.labels,
        defer_compile=request.defer_compile,
        compile_settings=_compile_settings(request, choice),
        check_parity=request.check_parity,
        runtime_reason=choice.reason,
        replace=request.replace,
        target=target,
        precision=precision,
    )
    return options, tuning


def precision_plan(request: BuildRequest, chosen: Family) -> PrecisionPlan | None:
    """The gated precision stage --precision asks for (None for fp32); its options checked together."""
    extras = {"--calibration-data": request.calibration_data is not None, "--accuracy-data": request.accuracy_data is not None,
              "--min-accuracy": request.min_accuracy is not None, "--fallback": request.fallback != REQUEST_DEFAULTS["fallback"],
              "--fallback-limit": request.fallback_limit != REQUEST_DEFAULTS["fallback_limit"],
              "--calibration-samples": request.calibration_samples != REQUEST_DEFAULTS["calibration_samples"]}
    if request.precision == "fp32":
        given = [flag for flag, present in extras.items() if present]
        if given:
            raise UserError(f"{', '.join(given)}: apply to --precision fp16|bf16|int8 only; pick one or drop them")
        return None
    metric = chosen.accuracy
    if metric is None:
        raise UserError(f"--precision {request.precision}: build {chosen.command} declares no accuracy metric to gate it; keep fp32")
    if request.accuracy_data is None:
        raise UserError(f"--precision {request.precision} needs --accuracy-data ({metric.unit} like those clients send, kept apart "
                        "from calibration): reduced precision is measured against fp32 before anything is written")
    gated = PrecisionRequest(request.precision, Path(request.accuracy_data),
                             Path(request.calibration_data) if request.calibration_data is not None else None,
                             request.min_accuracy, request.fallback, request.fallback_limit, request.calibration_samples)
    load_sets(gated, metric.unit)
    return PrecisionPlan(gated, metric)


def build_target(request: BuildRequest) -> DeployTarget:
    """The image the repository is built for: --triton-release (the newest known by default), --gpu/--no-gpu,
    --platform and --step-packages; refused before anything is exported."""
    return resolve_target(request.triton_release, request.check.gpu, request.platform, request.step_packages)


def build(request: BuildRequest, *, log: Log | None = None, phases: Phases | None = None) -> BuildOutcome:
    """Build ``request.family`` into ``request.out`` and validate it; ``outcome.check.command`` repeats the check.

    ``log`` receives progress lines (None: quiet); raises UserError/ToolError for bad input or a missing tool.
    """
    log = log or _silent
    chosen = family(request.family)
    options, tuning = build_options(request, chosen)
    # Refuse a contradictory check (e.g. --defer-compile --no-gpu) before anything is exported.
    planned = choose_check(options.out, options.settings.runtime, options.defer_compile, request.check, options.target)
    refuse_without_gpu(request.params, planned.options.gpu_present)
    phases = phases or Phases(False)
    job = prepare_family(chosen, options, request.params, phases)
    result = build_family(chosen, options, request.params, phases=phases, log=log, job=job)
    log(tuning.summary())  # after the build: an option refused on the way (e.g. --version taken) stays one line
    log(f"built for {options.target.describe()}" if options.target is not None else "built for no particular image")
    check = choose_check(result.repository, result.runtime, result.pending_compile, request.check, options.target)
    # A note, not a timed step: --live shows its own progress, and two live displays cannot nest.
    phases.note(f"validating: {check.command}")
    outcome = run_check(check, log=log)
    return BuildOutcome(result, outcome)
