"""The generic flow behind ``repo-builder build``: export, (compile), render, stage, move into place, record.

Families (pipelines/registry.py) supply the export and the renderer; this module knows none of them.

Everything is produced inside a staging folder inside the output repository (export output included),
so the big files reach their version folders by rename, and an interrupted build leaves the old
repository as it was.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from repo_builder.compile import CompileSettings, compile_plan, defer_plan
from repo_builder.compile.pending import external_data_files
from repo_builder.deploy_target import DeployTarget
from repo_builder.errors import UserError
from repo_builder.fsutil import write_text_atomic
from repo_builder.pipelines.build_check import rehearsal_options
from repo_builder.pipelines.option_files import check_labels_file
from repo_builder.pipelines.settings import ModelSource, PipelineSettings, check_version, step_names
from repo_builder.pipelines.step_packages import (
    PackagePlan,
    dockerfile_text,
    merge_target,
    provide_packages,
    target_record,
)
from repo_builder.precision.answers import REFERENCE_FILE
from repo_builder.precision.gate import PrecisionPlan, describe, reduce_precision
from repo_builder.render.context import check_tensor_name
from repo_builder.render.environment import make_environment
from repo_builder.render.rendered import RenderedModel
from repo_builder.repository.build_target import check_api_unchanged
from repo_builder.repository.judge import repository_judge
from repo_builder.repository.manifest import MANIFEST_FILE, read_manifest, record_target, update_manifest
from repo_builder.repository.stage import build_stage
from repo_builder.repository.versions import choose_versions
from repo_builder.repository.writer import commit_models, stage_model
from repo_builder.spec import SIGNATURE_FILE, OnnxArtifact, read_signature

Log = Callable[[str], None]
DOCKERFILE = "Dockerfile"  # at the repository's root, which Triton ignores (only subfolders are models)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class BuildOptions:
    out: Path
    settings: PipelineSettings
    version: int | None = None  # None: the next free version of every step
    force: bool = False
    templates: Path | None = None
    labels: Path | None = None  # --labels: read by the families that declare it (classification: overrides export's)
    defer_compile: bool = False
    compile_settings: CompileSettings | None = None  # the tensorrt runtime's build settings
    check_parity: bool = True
    runtime_reason: str = ""  # why this runtime (auto says which it picked and why)
    record: Mapping[str, Any] = field(default_factory=dict)  # extra build settings for the manifest
    replace: bool = False  # --replace: the ensemble's API may change (repository/build_target.py)
    # Where the repository will run (--triton-release, --gpu, --platform, --step-packages); None: build for
    # no particular image (nothing shipped, no target recorded), as library callers did before targets.
    target: DeployTarget | None = None
    precision: PrecisionPlan | None = None  # --precision fp16|bf16|int8: the model step reduced and gated

    def __post_init__(self) -> None:
        check_version(self.version)


@dataclass(frozen=True)
class BuiltModel:
    name: str
    version: int
    role: str
    files: Mapping[str, str]  # relative to the version folder -> sha256


@dataclass(frozen=True)
class BuildResult:
    repository: Path
    ensemble: str
    runtime: str
    models: tuple[BuiltModel, ...]
    manifest: Path
    pending_compile: bool = False
    target: DeployTarget | None = None
    packages: PackagePlan | None = None
    head: str | None = None  # signature.json's "head": "untrained" when --new-head added a random one
    # The model step's tuning as built, so a deploy on a bigger machine knows what to re-tune (issue 15).
    model_instances: int = 1
    intra_op_threads: int = 0  # 0: cores // instances, decided at load

    def to_json(self) -> dict[str, Any]:
        return {
            "repository": str(self.repository),
            "ensemble": self.ensemble,
            "runtime": self.runtime,
            "pending_compile": self.pending_compile,
            "target": self.target.describe() if self.target is not None else None,
            "head": self.head,
            "models": [{"name": m.name, "version": m.version, "role": m.role} for m in self.models],
            "model_step": {"instances": self.model_instances, "intra_op_threads": self.intra_op_threads},
        }


def _onnx_files(onnx_path: Path) -> dict[str, Path]:
    """model.onnx plus the external-data files it refers to (kept beside it, same relative names)."""
    files: dict[str, Path] = {"model.onnx": onnx_path}
    for name in external_data_files(onnx_path):
        files[name] = onnx_path.parent / name
    return files


def model_source(artifact: OnnxArtifact, options: BuildOptions, scratch: Path, log: Log) -> ModelSource:
    """What the model step's version folder holds, per runtime (compiling or deferring for TensorRT)."""
    runtime = options.settings.runtime
    if runtime in ("python", "onnxruntime"):
        return ModelSource(artifact.signature, _onnx_files(artifact.onnx_path), default_model_filename="model.onnx")
    settings = options.compile_settings or CompileSettings()
    settings = replace(settings, max_batch_size=options.settings.max_batch_size)
    folder = scratch / "tensorrt"
    if options.defer_compile:
        defer_plan(artifact.onnx_path, artifact.signature, folder, settings)
        log("TensorRT plan deferred: run 'repo-builder compile-pending REPO' on a GPU machine")
        files = {p.name: p for p in sorted(folder.iterdir()) if p.is_file()}
        return ModelSource(artifact.signature, files, default_model_filename="model.plan")
    plan = compile_plan(artifact.onnx_path, artifact.signature, folder, settings, log=log)
    files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}
    cc: dict[str, str] = {}
    default = plan.plan_path.name
    if settings.per_capability:
        cc = {plan.compute_capability: plan.plan_path.name}
    return ModelSource(plan.signature, files, default_model_filename=default, cc_model_filenames=cc)


def _record_target(out: Path, target: DeployTarget, packages: PackagePlan, log: Log) -> dict[str, Any]:
    """The manifest's target, merged with what earlier builds for the same image recorded (every pipeline in
    the repository runs on one image: its Dockerfile installs what all of them import). Written ahead of the
    models where a manifest exists (a superset of the image's needs is harmless); the Dockerfile too."""
    record = merge_target(read_manifest(out).get("target"), target_record(target, packages, DOCKERFILE if packages.image else None))
    pins = sorted(set(record["image_provides"].values()))
    if record["step_packages"] == "dockerfile" and pins:
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / DOCKERFILE, dockerfile_text(target, pins))
        log(f"wrote {out / DOCKERFILE}: build the server image from it ({len(pins)} packages over {target.image_name})")
    if (out / MANIFEST_FILE).is_file():
        record_target(out, record)
    return record


def read_export(folder: Path) -> OnnxArtifact:
    """An existing ``repo-builder export`` folder (model.onnx, signature.json, labels.txt, tokenizer/)."""
    if not folder.is_dir():
        raise UserError(f"--from-export {folder}: no such folder; pass the --out folder of 'repo-builder export'")
    onnx_path = folder / "model.onnx"
    if not onnx_path.is_file():
        raise UserError(f"--from-export {folder}: no model.onnx; pass the --out folder of 'repo-builder export'")
    signature = read_signature(folder / SIGNATURE_FILE)
    for tensor in (*signature.inputs, *signature.outputs):
        # Before anything else reads the export: these names reach configs and generated model.py files.
        try:
            check_tensor_name(tensor.name)
        except UserError as exc:
            raise UserError(f"{folder / SIGNATURE_FILE}: {exc}") from None
    preprocess = signature.metadata.get("preprocess")
    tokenizer = folder / str(preprocess.get("tokenizer_dir", "tokenizer")) if isinstance(preprocess, dict) else None
    return OnnxArtifact(
        onnx_path=onnx_path,
        signature_path=folder / SIGNATURE_FILE,
        signature=signature,
        tokenizer_dir=tokenizer if tokenizer is not None and tokenizer.is_dir() else None,
    )


def read_task_export(folder: Path, task: str, keys: tuple[str, ...] = ()) -> OnnxArtifact:
    """``read_export``, refusing an export of another task (a text model given to the image pipeline) or one
    missing a metadata key the family's steps read (``keys``: ``Family.signature_keys``)."""
    artifact = read_export(folder)
    found = artifact.signature.metadata.get("task")
    if found is not None and found != task:
        raise UserError(f"{artifact.signature_path}: the export is a '{found}' model, not '{task}'")
    missing = [key for key in keys if key not in artifact.signature.metadata]
    if missing:
        raise UserError(f"{artifact.signature_path}: metadata has no {', '.join(missing)}; re-run 'repo-builder export' "
                        f"to record what the {task} steps read")
    return artifact


# render(env, the model step's source, the export, versions by model name, settings or None for the build's own)
# -> every model of the pipeline.
Renderer = Callable[[Any, ModelSource, OnnxArtifact, Mapping[str, int], PipelineSettings | None], tuple[RenderedModel, ...]]


def reduce_model_step(options: BuildOptions, artifact: OnnxArtifact, render: Renderer, work: Path, log: Log) -> tuple[OnnxArtifact, dict[str, Any]]:
    """--precision: the model step's ONNX reduced and gated (precision/gate.py), served here as ONNX Runtime runs
    it (the Python backend's for --runtime python, else the ONNX Runtime backend's): the gate measures the graph
    every runtime gets. Its pipeline is rendered for this machine (nothing shipped), versions all 1."""
    plan = options.precision
    assert plan is not None
    env = make_environment(options.templates)
    env.globals["deploy_target"] = options.target
    served = "python" if options.settings.runtime == "python" else "onnxruntime"
    settings = replace(options.settings, runtime=served, nvcf=None)  # the gate sends the data inline
    names = step_names(options.settings.name)

    def render_onnx(onnx_path: Path) -> tuple[RenderedModel, ...]:
        candidate = replace(artifact, onnx_path=onnx_path)
        source = ModelSource(artifact.signature, _onnx_files(onnx_path), default_model_filename="model.onnx")
        return render(env, source, candidate, dict.fromkeys(names.values(), 1), settings)

    result = reduce_precision(artifact.onnx_path, plan.request, plan.metric, render_onnx, work, options.settings.max_batch_size, log)
    log(f"precision: the model step is {describe(result.record)}")
    return replace(artifact, onnx_path=result.onnx_path), {**result.record, "reference": result.reference}


def _with_reference(rendered: tuple[RenderedModel, ...], record: Mapping[str, Any] | None) -> tuple[RenderedModel, ...]:
    """The float answers the gate measured against, beside the gated model step (``precision/answers.py``)."""
    reference = record.pop("reference", None) if isinstance(record, dict) else None
    if reference is None:
        return rendered
    return tuple(replace(m, files={**m.files, REFERENCE_FILE: reference}) if m.role == "model" else m for m in rendered)


def build_pipeline(
    options: BuildOptions,
    export: Callable[[Path], OnnxArtifact],
    render: Renderer,
    *,
    pipeline: str,
    log: Log = _stderr,
) -> BuildResult:
    """Shared flow: plan versions, stage, export into the stage, render, move into place, record."""
    out = options.out
    names = step_names(options.settings.name)
    check_labels_file(options.labels)
    env = make_environment(options.templates)
    target = options.target
    env.globals["deploy_target"] = target  # what a family's render may ask of the image (op library paths)
    if target is not None and target.step_packages == "ship":
        env.globals["ship_python"] = target.python  # generated steps put site-packages on sys.path under it
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a folder")
    if out.is_dir():  # fail before exporting; planned again under the lock, where it counts
        choose_versions(out, list(names.values()), options.version, options.force)
    settings = {
        "pipeline": pipeline,
        **{k: v for k, v in asdict(options.settings).items()},
        "defer_compile": options.defer_compile,
        "labels": str(options.labels) if options.labels else None,
        **dict(options.record),
    }
    log(f"runtime: {options.settings.runtime}" + (f" ({options.runtime_reason})" if options.runtime_reason else ""))
    # Stage beside --out under its lock (held to the manifest): versions are planned under it too.
    with build_stage(out, log) as stage:
        versions = choose_versions(out, list(names.values()), options.version, options.force)
        artifact = export(stage.root / "export")
        if options.precision is not None:
            artifact, settings["precision"] = reduce_model_step(options, artifact, render, stage.root / "precision", log)
        source = model_source(artifact, options, stage.root / "compile", log)
        rendered = _with_reference(render(env, source, artifact, versions, None), settings.get("precision"))
        check_api_unchanged(out, rendered, options.replace)  # before anything is staged or moved
        packages = None
        if target is not None:
            rendered, packages = provide_packages(rendered, target, log)
        staged = [stage_model(stage, m) for m in rendered]
        log(f"writing {', '.join(f'{m.name}/{m.version}' for m in staged)} into {out} (validated before anything moves)")
        record = None
        if target is not None and packages is not None:
            # Before the rehearsal: the states it judges need this build's image too (what its Dockerfile adds).
            record = _record_target(out, target, packages, log)
        judge = repository_judge(rehearsal_options(options.settings.runtime, options.defer_compile))
        commit_models(stage, staged, judge=judge, log=log)
        manifest = update_manifest(out, staged, settings, target=record)
    return BuildResult(
        repository=out,
        ensemble=names["ensemble"],
        runtime=options.settings.runtime,
        models=tuple(BuiltModel(m.name, m.version, m.role, dict(m.files)) for m in staged),
        manifest=manifest,
        pending_compile=options.defer_compile,
        target=target,
        packages=packages,
        model_instances=options.settings.instance_count,
        intra_op_threads=options.settings.intra_op_threads,
    )
