"""The parts of a model family record (``registry.Family``) that family modules build on.

A family declares everything task-specific as data and functions over frozen dataclasses; the generic
flow (assemble, model step, ensemble, writing, build check, the ``export``/``build`` CLI, bench and the
reference check runner) calls them and knows no task. docs/new-family.md is the manual of this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.pipelines.option_record import (
    FamilyOption as FamilyOption,  # re-exported: family modules import it from here
)
from repo_builder.pipelines.settings import ModelSource, PipelineSettings
from repo_builder.precision.gate import AccuracyMetric
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact

if TYPE_CHECKING:
    from repo_builder.export.progress import Phases
    from repo_builder.pipelines.assemble import BuildOptions

@dataclass(frozen=True)
class FamilyJob:
    """What a family's ``prepare`` resolved its options to."""

    export: Callable[[Path], OnnxArtifact]  # exports into the given (staging) folder
    record: Mapping[str, Any]  # what the manifest records about the model's source ("model": the checkpoint)
    describe: str = "exporting the model to ONNX"  # the progress line while ``export`` runs


@dataclass(frozen=True)
class RenderInputs:
    """What a family's ``render`` gets: the export, the model step's files, the settings and the versions."""

    env: Any  # the Jinja2 environment (templates by name)
    source: ModelSource  # the model step's files and signature (a plan's own for TensorRT)
    artifact: OnnxArtifact  # the export: model.onnx, signature.json (metadata: the family's own keys), tokenizer/
    settings: PipelineSettings
    versions: Mapping[str, int]  # model name -> version folder to write
    labels_file: Path | None = None  # --labels (only families with "labels" in shared_options get one)
    params: Mapping[str, Any] = field(default_factory=dict)  # the family's own build options by dest (as ``prepare`` gets them)

    @property
    def origin(self) -> str:
        """Where the signature came from, for error messages."""
        return str(self.artifact.signature_path)


@dataclass(frozen=True)
class ExportSettings:
    """The options every ``export`` subcommand shares."""

    out: Path
    opset: int
    tolerance: float
    check_parity: bool
    progress: bool

    def kwargs(self) -> dict[str, Any]:
        """As the keyword arguments every ``export_*`` function takes."""
        return {"opset": self.opset, "check_parity": self.check_parity, "tolerance": self.tolerance, "progress": self.progress}


@dataclass(frozen=True)
class FamilyExport:
    """The family's ``repo-builder export <command>``: its own options, and the function writing the export."""

    summary: str
    options: tuple[FamilyOption, ...]
    run: Callable[[Mapping[str, Any], ExportSettings], OnnxArtifact]  # params by dest -> the export in settings.out


# --- the reference check: the framework's own inference vs what the built repository returns ---------------

# One request to the served ensemble: input name -> numpy array; returns output name -> numpy array.
Infer = Callable[[Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class ReferenceRun:
    """What the generic runner hands a family's ``check``: the checkpoint and a client of the served ensemble."""

    model: Path  # the checkpoint the repository was built from (the manifest's "model", or given)
    infer: Infer  # one request to the ensemble; a batch is one request (the ensemble's batch axis)
    max_batch_size: int  # the ensemble's; split larger batches
    minimum_cases: int = 200  # at least this many inputs
    settings: Mapping[str, Any] = field(default_factory=dict)  # the ensemble's build settings from the manifest (family options)


@dataclass(frozen=True)
class ReferenceReport:
    """A family's verdict: ``passed`` only when every case was compared and every figure met its bound."""

    family: str
    cases: int
    passed: bool
    figures: Mapping[str, float]  # measured: e.g. {"min_cosine": 0.99999, "max_abs_diff": 3e-6}
    bounds: Mapping[str, str]  # what passing means: e.g. {"min_cosine": ">= 0.9999"}
    failures: tuple[str, ...] = ()  # the first few failing cases, described in one line each

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "cases": self.cases, "passed": self.passed, "figures": dict(self.figures),
                "bounds": dict(self.bounds), "failures": list(self.failures)}


@dataclass(frozen=True)
class InProcess:
    """The framework's own inference loaded once, for bench's reference figure (same inputs as served)."""

    run: Callable[[Sequence[Any]], Any]  # a batch of items (texts, image bytes) -> the framework's outputs
    threads: int  # the intra-op threads it runs with (bench reports it beside the figure)


@dataclass(frozen=True)
class FamilyReference:
    """How to judge a built repository by the framework's own inference, and to bench against it."""

    check: Callable[[ReferenceRun], ReferenceReport]
    items: Callable[[int], Sequence[Any]]  # n representative inputs (texts, encoded images) for bench
    request: Callable[[Sequence[Any]], Mapping[str, Any]]  # a batch of items -> the ensemble's inputs
    load: Callable[[Path, int], InProcess]  # (checkpoint, threads) -> the framework's inference in process
    unit: str = "items"  # what bench counts: "texts", "images"


# prepare(params by dest, the build's options, progress) -> FamilyJob; raises UserError on bad options.
Prepare = Callable[[Mapping[str, Any], "BuildOptions", "Phases"], FamilyJob]
# render(inputs) -> every model of the pipeline (pre, model, post..., the ensemble last).
FamilyRenderer = Callable[[RenderInputs], tuple[RenderedModel, ...]]


@dataclass(frozen=True)
class Family:
    """One model family: ``repo-builder build <command>`` and ``repo-builder export <command>``."""

    command: str  # the subcommand: ``repo-builder build <command>``
    task: str  # signature.json metadata "task" its exports carry; --from-export of another task is refused
    summary: str  # the subcommand's --help
    default_name: str  # --name when not given
    prepare: Prepare  # the family's options -> how to export, what to record (cheap checks, no export yet)
    render: FamilyRenderer  # the export -> every model of the pipeline
    options: tuple[FamilyOption, ...] = ()  # extra CLI options; values reach ``prepare`` by ``dest``
    templates: tuple[str, ...] = ()  # the model.py templates it renders (config templates are generic)
    export: FamilyExport | None = None  # its ``repo-builder export`` subcommand (None: build only)
    signature_keys: tuple[str, ...] = ()  # metadata keys of signature.json its export writes and render reads
    shared_options: tuple[str, ...] = ()  # of request_options.SHARED_OPTIONS: the shared build options it reads
    reference: FamilyReference | None = None  # its reference check and bench reference
    title: str = ""  # one line for `build --help` / `export --help` listings (default: summary up to its first ': ')
    accuracy: AccuracyMetric | None = None  # the task metric `build --precision` is gated on (docs/precision.md)

    @property
    def short_help(self) -> str:
        return self.title or self.summary.split(": ", 1)[0]
