"""The library behind ``repo-builder build``: export, (compile), render, stage, move into place, record.

Everything is produced inside a staging folder inside the output repository (export output included),
so the big files reach their version folders by rename, and an interrupted build leaves the old
repository as it was.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError
from repo_builder.pipelines.common import ModelSource, PipelineSettings, read_labels, step_names
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact, Signature

if TYPE_CHECKING:
    from repo_builder.compile.settings import CompileSettings

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class BuildOptions:
    out: Path
    settings: PipelineSettings
    version: int | None = None  # None: the next free version of every step
    force: bool = False
    templates: Path | None = None
    labels: Path | None = None  # overrides the labels export wrote
    defer_compile: bool = False
    compile_settings: CompileSettings | None = None  # the tensorrt runtime's build settings
    check_parity: bool = True
    runtime_reason: str = ""  # why this runtime (auto says which it picked and why)
    record: Mapping[str, Any] = field(default_factory=dict)  # extra build settings for the manifest


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

    def to_json(self) -> dict[str, Any]:
        return {
            "repository": str(self.repository),
            "ensemble": self.ensemble,
            "runtime": self.runtime,
            "pending_compile": self.pending_compile,
            "models": [{"name": m.name, "version": m.version, "role": m.role} for m in self.models],
        }


def _onnx_files(onnx_path: Path) -> dict[str, Path]:
    """model.onnx plus the external-data files it refers to (kept beside it, same relative names)."""
    from repo_builder.compile.pending import external_data_files

    files: dict[str, Path] = {"model.onnx": onnx_path}
    for name in external_data_files(onnx_path):
        files[name] = onnx_path.parent / name
    return files


def model_source(artifact: OnnxArtifact, options: BuildOptions, scratch: Path, log: Log) -> ModelSource:
    """What the model step's version folder holds, per runtime (compiling or deferring for TensorRT)."""
    runtime = options.settings.runtime
    if runtime in ("python", "onnxruntime"):
        return ModelSource(artifact.signature, _onnx_files(artifact.onnx_path), default_model_filename="model.onnx")
    from repo_builder.compile import CompileSettings, compile_plan, defer_plan

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


def _labels(artifact: OnnxArtifact, options: BuildOptions, num_classes: int) -> tuple[str, ...]:
    if options.labels is not None:
        return read_labels(options.labels, num_classes, "the model")
    if artifact.labels:
        return tuple(artifact.labels)
    labels_file = artifact.onnx_path.parent / str(artifact.signature.metadata.get("labels_file", "labels.txt"))
    if labels_file.is_file():
        return read_labels(labels_file, num_classes, "the model")
    return tuple(f"class_{i}" for i in range(num_classes))


def _num_classes(signature: Signature) -> int:
    from repo_builder.render.context import single_logits_output

    return single_logits_output(signature, "signature.json").triton_dims(signature.batch_axis)[0]


def read_export(folder: Path) -> OnnxArtifact:
    """An existing ``repo-builder export`` folder (model.onnx, signature.json, labels.txt, tokenizer/)."""
    from repo_builder.spec import SIGNATURE_FILE, read_signature

    if not folder.is_dir():
        raise UserError(f"--from-export {folder}: no such folder; pass the --out folder of 'repo-builder export'")
    onnx_path = folder / "model.onnx"
    if not onnx_path.is_file():
        raise UserError(f"--from-export {folder}: no model.onnx; pass the --out folder of 'repo-builder export'")
    signature = read_signature(folder / SIGNATURE_FILE)
    preprocess = signature.metadata.get("preprocess")
    tokenizer = folder / str(preprocess.get("tokenizer_dir", "tokenizer")) if isinstance(preprocess, dict) else None
    return OnnxArtifact(
        onnx_path=onnx_path,
        signature_path=folder / SIGNATURE_FILE,
        signature=signature,
        tokenizer_dir=tokenizer if tokenizer is not None and tokenizer.is_dir() else None,
    )


def _read_task_export(folder: Path, task: str) -> OnnxArtifact:
    """``read_export``, refusing an export of another task (a text model given to the image pipeline)."""
    artifact = read_export(folder)
    found = artifact.signature.metadata.get("task")
    if found is not None and found != task:
        raise UserError(f"{artifact.signature_path}: the export is a '{found}' model, not '{task}'")
    return artifact


def check_labels_file(path: Path | None) -> None:
    """Fail before exporting when --labels cannot be read (the class count is checked after export)."""
    if path is None:
        return
    if not path.is_file():
        raise UserError(f"--labels {path}: no such file")
    try:
        path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--labels {path}: cannot read it as UTF-8 text ({exc})") from None


Renderer = Callable[[Any, ModelSource, OnnxArtifact, tuple[str, ...], Mapping[str, int]], tuple[RenderedModel, ...]]


def build_pipeline(
    options: BuildOptions,
    export: Callable[[Path], OnnxArtifact],
    render: Renderer,
    *,
    pipeline: str,
    log: Log = _stderr,
) -> BuildResult:
    """Shared flow: plan versions, stage, export into the stage, render, move into place, record."""
    from repo_builder.render.environment import make_environment
    from repo_builder.repository.manifest import update_manifest
    from repo_builder.repository.versions import plan_versions
    from repo_builder.repository.writer import commit_models, stage_model, staging_area

    out = options.out
    names = step_names(options.settings.name)
    check_labels_file(options.labels)
    env = make_environment(options.templates)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a folder")
    versions = plan_versions(out, list(names.values()), options.version, options.force) if out.is_dir() else {
        n: options.version or 1 for n in names.values()
    }
    log(f"runtime: {options.settings.runtime}" + (f" ({options.runtime_reason})" if options.runtime_reason else ""))
    with staging_area(out, prefer=list(names.values())) as stage:
        artifact = export(stage / "export")
        source = model_source(artifact, options, stage / "compile", log)
        labels = _labels(artifact, options, _num_classes(artifact.signature))
        rendered = render(env, source, artifact, labels, versions)
        staged = [stage_model(stage, m) for m in rendered]
        log(f"writing {', '.join(f'{m.name}/{m.version}' for m in staged)} into {out}")
        commit_models(out, staged, force=options.force)
    settings = {
        "pipeline": pipeline,
        **{k: v for k, v in asdict(options.settings).items()},
        "defer_compile": options.defer_compile,
        "labels": str(options.labels) if options.labels else None,
        **dict(options.record),
    }
    manifest = update_manifest(out, staged, settings)
    return BuildResult(
        repository=out,
        ensemble=names["ensemble"],
        runtime=options.settings.runtime,
        models=tuple(BuiltModel(m.name, m.version, m.role, dict(m.files)) for m in staged),
        manifest=manifest,
        pending_compile=options.defer_compile,
    )


def build_resnet50(
    options: BuildOptions, *, weights: str = "imagenet", from_export: Path | None = None, log: Log = _stderr
) -> BuildResult:
    """``from_export``: build from an existing export folder instead of exporting (its files are copied)."""
    from repo_builder.pipelines.image_classification import render_image_pipeline

    def export(folder: Path) -> OnnxArtifact:
        if from_export is not None:
            return _read_task_export(from_export, "image-classification")
        from repo_builder.export.resnet50 import export_resnet50

        log(f"exporting ResNet50 ({weights} weights) to ONNX")
        return export_resnet50(folder, weights=weights, check_parity=options.check_parity)

    def render(env: Any, source: ModelSource, artifact: OnnxArtifact, labels: tuple[str, ...], versions: Mapping[str, int]) -> tuple[RenderedModel, ...]:
        return render_image_pipeline(env, source, artifact.signature, labels, options.settings, versions, origin=str(artifact.signature_path))

    if from_export is not None:
        read_export(from_export)  # fail before staging anything
    source = str(from_export.resolve()) if from_export is not None else "resnet50"
    record = {"model": source, "weights": None if from_export else weights, **dict(options.record)}
    return build_pipeline(replace(options, record=record), export, render, pipeline="image-classification", log=log)


def build_text_classifier(
    options: BuildOptions,
    *,
    model_dir: Path | None,
    max_length: int | None = None,
    from_export: Path | None = None,
    log: Log = _stderr,
) -> BuildResult:
    """Export ``model_dir`` (or take ``from_export``) and build the text pipeline."""
    from repo_builder.pipelines.text_classification import render_text_pipeline

    if (model_dir is None) == (from_export is None):
        raise UserError("pass exactly one of --model PATH (a Hugging Face folder) or --from-export DIR")
    if from_export is not None:
        read_export(from_export)
    elif not model_dir.is_dir():  # type: ignore[union-attr]
        raise UserError(f"--model {model_dir}: no such folder; pass a Hugging Face model folder (config, weights, tokenizer)")

    def export(folder: Path) -> OnnxArtifact:
        if from_export is not None:
            return _read_task_export(from_export, "text-classification")
        assert model_dir is not None
        from repo_builder.export.text_classifier import export_text_classifier

        log(f"exporting {model_dir} to ONNX")
        return export_text_classifier(model_dir, folder, max_length=max_length, check_parity=options.check_parity)

    def render(env: Any, source: ModelSource, artifact: OnnxArtifact, labels: tuple[str, ...], versions: Mapping[str, int]) -> tuple[RenderedModel, ...]:
        tokenizer_dir = artifact.tokenizer_dir
        if tokenizer_dir is None:
            tokenizer_dir = artifact.onnx_path.parent / str(artifact.signature.metadata.get("preprocess", {}).get("tokenizer_dir", "tokenizer"))
        return render_text_pipeline(
            env, source, artifact.signature, labels, options.settings, versions, tokenizer_dir, origin=str(artifact.signature_path)
        )

    source_dir = from_export if from_export is not None else model_dir
    assert source_dir is not None
    record = {"model": str(source_dir.resolve()), "max_length": max_length, **dict(options.record)}
    return build_pipeline(replace(options, record=record), export, render, pipeline="text-classification", log=log)
