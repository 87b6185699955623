"""The parts of a model family record (``registry.Family``) that family modules build on."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.pipelines.settings import ModelSource, PipelineSettings
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact

if TYPE_CHECKING:
    from repo_builder.export.progress import Steps
    from repo_builder.pipelines.assemble import BuildOptions


@dataclass(frozen=True)
class FamilyOption:
    """An extra option of a family's ``build`` subcommand, as data (cli/build.py turns it into a click option)."""

    flags: tuple[str, ...]  # ("--model",) or ("--weights",)
    dest: str  # the keyword ``prepare`` reads
    help: str
    default: Any = None
    kind: str = "text"  # text | path | int | flag
    metavar: str | None = None
    conflicts_with_export: bool = True  # meaningless with --from-export (the export already happened)


@dataclass(frozen=True)
class FamilyJob:
    """What a family's ``prepare`` resolved its options to."""

    export: Callable[[Path], OnnxArtifact]  # exports into the given (staging) folder
    record: Mapping[str, Any]  # what the manifest records about the model's source
    describe: str = "exporting the model to ONNX"  # the progress line while ``export`` runs


# prepare(params by dest, the build's options, progress) -> FamilyJob; raises UserError on bad options.
Prepare = Callable[[Mapping[str, Any], "BuildOptions", "Steps"], FamilyJob]
# render(env, model step's source, the export, labels, settings, versions by model name) -> every model.
FamilyRenderer = Callable[
    [Any, ModelSource, OnnxArtifact, tuple[str, ...], PipelineSettings, Mapping[str, int]], tuple[RenderedModel, ...]
]
