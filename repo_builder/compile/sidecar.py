"""``plan.json``: what a plan is, written beside it so validation needs neither a GPU nor TensorRT.

One ``plan.json`` per folder describes every plan in it (``model.plan``, ``model_sm90.plan`` ...), keyed
by file name, so per-capability builds on several GPU machines add to the same file::

    {"format": 1, "plans": {"model_sm86.plan": {"tensorrt_version": "10.3.0", "gpu_name": "NVIDIA A10",
      "compute_capability": "8.6", "precision": "fp16", "builder": "api", "io_source": "engine",
      "profiles": [{"input": {"min": [1, 3, 224, 224], "opt": [...], "max": [...]}}],
      "inputs": [{"name": "input", "dtype": "FLOAT", "shape": [-1, 3, 224, 224]}], "outputs": [...]}}}

``dtype`` is TensorRT's name (``FLOAT``, ``HALF``, ``INT64`` ...); shapes are the engine's, batch axis
included, -1 where dynamic.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo_builder import dtypes
from repo_builder.compile.settings import profile_from_json, profile_to_json
from repo_builder.errors import UserError
from repo_builder.fsutil import read_json_format, write_text_atomic
from repo_builder.spec import Profile

SIDECAR_FILE = "plan.json"
SIDECAR_FORMAT = 1


@dataclass(frozen=True)
class EngineTensor:
    name: str
    dtype: str  # TensorRT DataType name
    shape: tuple[int, ...]

    @property
    def triton_type(self) -> str:
        return dtypes.from_tensorrt(self.dtype).triton

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EngineTensor:
        return cls(str(data["name"]), str(data["dtype"]).removeprefix("DataType."), tuple(int(d) for d in data["shape"]))


@dataclass(frozen=True)
class PlanInfo:
    """One plan as built: versions, target GPU, profiles, precision, and the engine's own IO."""

    filename: str
    tensorrt_version: str
    compute_capability: str
    profiles: tuple[Profile, ...]
    inputs: tuple[EngineTensor, ...]
    outputs: tuple[EngineTensor, ...]
    gpu_name: str = ""
    precision: str = ""
    builder: str = ""
    io_source: str = "engine"  # "engine": read back from the built engine; "onnx": trtexec without TensorRT's Python API
    notes: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def tensor(self, name: str) -> EngineTensor | None:
        for t in (*self.inputs, *self.outputs):
            if t.name == name:
                return t
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "tensorrt_version": self.tensorrt_version,
            "gpu_name": self.gpu_name,
            "compute_capability": self.compute_capability,
            "precision": self.precision,
            "builder": self.builder,
            "io_source": self.io_source,
            "notes": list(self.notes),
            "profiles": [profile_to_json(p) for p in self.profiles],
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
        }

    @classmethod
    def from_json(cls, filename: str, data: dict[str, Any]) -> PlanInfo:
        known = {
            "tensorrt_version", "gpu_name", "compute_capability", "precision", "builder", "io_source",
            "notes", "profiles", "inputs", "outputs",
        }
        return cls(
            filename=filename,
            tensorrt_version=str(data["tensorrt_version"]),
            compute_capability=str(data["compute_capability"]),
            profiles=tuple(profile_from_json(p) for p in data.get("profiles", [])),
            inputs=tuple(EngineTensor.from_json(t) for t in data.get("inputs", [])),
            outputs=tuple(EngineTensor.from_json(t) for t in data.get("outputs", [])),
            gpu_name=str(data.get("gpu_name", "")),
            precision=str(data.get("precision", "")),
            builder=str(data.get("builder", "")),
            io_source=str(data.get("io_source", "engine")),
            notes=tuple(str(n) for n in data.get("notes", [])),
            extra={k: v for k, v in data.items() if k not in known},
        )


def read_sidecar(path: Path) -> dict[str, PlanInfo]:
    """Plans described by a ``plan.json`` (or the one in a folder). A bad file is a one-line UserError."""
    if path.is_dir():
        path = path / SIDECAR_FILE
    try:
        data = read_json_format(path, SIDECAR_FORMAT)
        return {name: PlanInfo.from_json(name, entry) for name, entry in data["plans"].items()}
    except FileNotFoundError:
        raise UserError(f"{path}: no {SIDECAR_FILE}; rebuild the plan with 'repo-builder compile'") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UserError) as exc:
        raise UserError(f"{path}: not a valid {SIDECAR_FILE} ({exc}); rebuild the plan with 'repo-builder compile'") from None


def sidecar_json(plans: dict[str, PlanInfo]) -> str:
    body = {"format": SIDECAR_FORMAT, "plans": {name: plans[name].to_json() for name in sorted(plans)}}
    return json.dumps(body, indent=2) + "\n"


def write_sidecar(folder: Path, info: PlanInfo, existing: Path | None = None) -> Path:
    """Add ``info`` to ``folder/plan.json`` (merging what ``existing`` or the folder already has), atomically."""
    target = folder / SIDECAR_FILE
    source = existing if existing is not None else target
    plans = read_sidecar(source) if source.exists() else {}
    plans[info.filename] = info
    write_text_atomic(target, sidecar_json(plans))
    return target

