"""The pipeline the precision gate measures: rendered into a scratch folder, served on the embedded Triton.

The gate compares what clients would get, so it serves the whole pipeline (the family's own pre- and
post-processing around the model step) and calls it as clients do. Calibration tensors come from the same
server: the steps before the model step are called in turn with the client's inputs, so the scales are
fitted to exactly what the served preprocessing hands the model. Reduced-precision candidates are added
as new version folders of the model step (latest wins) and loaded in place, so one server measures them all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from repo_builder.errors import ToolError
from repo_builder.render.rendered import RenderedModel
from repo_builder.triton.locate import locate_tritonserver
from repo_builder.triton.server import start_server
from repo_builder.triton.standin import StandIn, remove_stage, stage_repository
from repo_builder.triton_config import parse_config_text

Log = Callable[[str], None]
Answer = Mapping[str, Any]


def _place(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def write_scratch(folder: Path, models: Sequence[RenderedModel]) -> None:
    """The rendered models as a repository in ``folder`` (files linked where they can be)."""
    for model in models:
        version = folder / model.name / str(model.version)
        version.mkdir(parents=True, exist_ok=True)
        (folder / model.name / "config.pbtxt").write_text(model.config_text, encoding="utf-8")
        for rel, content in model.files.items():
            dest = version / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                dest.write_bytes(content)
            else:
                _place(Path(content), dest)


@dataclass(frozen=True)
class Wiring:
    """The ensemble's steps as data: which model each step calls and how tensors flow between them."""

    ensemble: str
    model_step: str
    steps: tuple[tuple[str, Mapping[str, str], Mapping[str, str]], ...]  # (model, input_map, output_map) in order


def wiring(models: Sequence[RenderedModel]) -> Wiring:
    ensemble = next(m for m in models if m.role == "ensemble")
    model = next(m for m in models if m.role == "model")
    config = parse_config_text(ensemble.config_text, f"{ensemble.name}/config.pbtxt")
    steps = tuple((s.model_name, dict(s.input_map), dict(s.output_map)) for s in config.ensemble_scheduling.step)
    return Wiring(ensemble.name, model.name, steps)


def onnxruntime_models(models: Sequence[RenderedModel]) -> list[str]:
    return [m.name for m in models if parse_config_text(m.config_text, f"{m.name}/config.pbtxt").platform == "onnxruntime_onnx"]


class ServedPipeline:
    """A started server with the scratch pipeline loaded; ``candidate`` swaps the model step's ONNX."""

    def __init__(self, server: Any, root: Path, wires: Wiring, max_batch_size: int, log: Log) -> None:
        self.server, self.root, self.wires, self.max_batch_size, self.log = server, root, wires, max(1, max_batch_size), log
        self.version = 1

    def model_inputs(self, request: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """The model step's input tensors for one client request: the steps before it, called in turn."""
        tensors: dict[str, Any] = dict(request)
        for model, input_map, output_map in self.wires.steps:
            if model == self.wires.model_step:
                return {key: np.asarray(tensors[value]) for key, value in input_map.items()}
            inputs = {key: tensors[value] for key, value in input_map.items() if value in tensors}
            outputs = self.server.infer(model, inputs, timeout=300.0)
            tensors.update({output_map[key]: value for key, value in outputs.items() if key in output_map})
        raise ToolError(f"{self.wires.ensemble}: no ensemble step calls {self.wires.model_step}")

    def answers(self, requests: Iterator[tuple[int, Mapping[str, Any]]], single: Callable[[int], Mapping[str, Any]]) -> list[Answer | None]:
        """The ensemble's answer per item: ``requests`` yields (items in it, request); a refused request is
        retried item by item (``single(i)``), and an item refused alone answers None."""
        answers: list[Answer | None] = []
        for count, request in requests:
            try:
                out = self.server.infer(self.wires.ensemble, request, timeout=300.0)
                answers.extend({name: value[row] for name, value in out.items()} for row in range(count))
            except Exception:
                self.server.check_alive()
                start = len(answers)
                for index in range(start, start + count):
                    try:
                        out = self.server.infer(self.wires.ensemble, single(index), timeout=300.0)
                        answers.append({name: value[0] for name, value in out.items()})
                    except Exception:
                        self.server.check_alive()
                        answers.append(None)
        return answers

    def candidate(self, onnx_path: Path) -> int:
        """Serve ``onnx_path`` as the model step's next version; returns that version once it is READY."""
        model = self.root / self.wires.model_step
        first = model / "1"
        self.version += 1
        folder = model / str(self.version)
        folder.mkdir()
        for entry in first.iterdir():
            if entry.is_file() and entry.name != "model.onnx" and not entry.name.startswith("model.onnx"):
                shutil.copyfile(entry, folder / entry.name)
        _place(onnx_path, folder / "model.onnx")
        data = onnx_path.parent / (onnx_path.name + ".data")
        if data.is_file():
            _place(data, folder / data.name)
        self.server.load(self.wires.model_step, timeout=600.0)
        self.server.load(self.wires.ensemble, timeout=600.0)
        states = {(m.name, str(m.version)): m.state for m in self.server.models()}
        if states.get((self.wires.model_step, str(self.version))) != "READY":
            raise ToolError(f"{self.wires.model_step}: version {self.version} (the {onnx_path.name} candidate) did not become READY")
        return self.version


@contextlib.contextmanager
def serve_pipeline(folder: Path, models: Sequence[RenderedModel], max_batch_size: int, log: Log) -> Iterator[ServedPipeline]:
    """``models`` written into ``folder`` and served (ONNX Runtime models through the stand-in where the
    embedded server has no ONNX Runtime backend)."""
    write_scratch(folder, models)
    wires = wiring(models)
    stand_ins = onnxruntime_models(models) if locate_tritonserver(None).bundled else []
    staged = stage_repository(folder, [StandIn(name) for name in stand_ins], parent=folder.parent) if stand_ins else None
    root = staged.path if staged is not None else folder
    try:
        with start_server(root, mode="explicit") as server:
            server.load(wires.ensemble, timeout=600.0)
            yield ServedPipeline(server, root, wires, max_batch_size, log)
    finally:
        if staged is not None:
            remove_stage(staged)
