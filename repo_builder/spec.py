"""Frozen dataclasses passed from stage to stage, checked when they are made.

``Signature`` is the contract between stages: export writes it as ``signature.json`` next to the ONNX,
and compile/render read it instead of guessing names, dtypes or shapes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from repo_builder import dtypes
from repo_builder.errors import UserError
from repo_builder.guarded_read import SETTINGS, UnsafeFile, loads_json, read_repository_file

SIGNATURE_FILE = "signature.json"
SIGNATURE_FORMAT = 1
# The batch size a build serves and compiles for unless told (--max-batch-size of build and compile, the
# compile recipe, the pipeline settings): written here once.
DEFAULT_MAX_BATCH_SIZE = 8

Dim = int | str  # an int is a fixed size; a str names a symbolic (dynamic) axis, e.g. "batch"


@dataclass(frozen=True)
class TensorSpec:
    """One model input or output. ``dtype`` is a numpy name ('float32', 'int64', 'object')."""

    name: str
    dtype: str
    shape: tuple[Dim, ...]

    def __post_init__(self) -> None:
        if not self.name:
            raise UserError("a tensor needs a non-empty name")
        dtypes.from_numpy(self.dtype)  # raises on an unknown dtype
        object.__setattr__(self, "shape", tuple(self.shape))
        for dim in self.shape:
            if isinstance(dim, bool) or not isinstance(dim, int | str) or (isinstance(dim, int) and dim < 1):
                raise UserError(f"tensor '{self.name}': dimension {dim!r} must be an integer >= 1 or an axis name")

    @property
    def triton_type(self) -> str:
        return dtypes.from_numpy(self.dtype).triton

    @property
    def onnx_type(self) -> str:
        return dtypes.from_numpy(self.dtype).onnx

    @property
    def dynamic_axes(self) -> dict[int, str]:
        return {i: d for i, d in enumerate(self.shape) if isinstance(d, str)}

    def triton_dims(self, batch_axis: int | None) -> tuple[int, ...]:
        """Dims as a Triton config writes them: the batch axis dropped, symbolic axes as -1."""
        return tuple(
            -1 if isinstance(d, str) else d for i, d in enumerate(self.shape) if i != batch_axis
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "onnx_type": self.onnx_type,
            "triton_type": self.triton_type,
            "shape": list(self.shape),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorSpec:
        return cls(name=data["name"], dtype=data["dtype"], shape=tuple(data["shape"]))


@dataclass(frozen=True)
class ParityResult:
    """ONNX Runtime vs PyTorch on one set of input shapes."""

    shapes: dict[str, tuple[int, ...]]
    max_abs_error: float
    max_rel_error: float
    passed: bool


@dataclass(frozen=True)
class Signature:
    """What a model file takes and returns. ``batch_axis`` is shared by every tensor (None: no batching)."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    batch_axis: int | None = 0
    metadata: dict[str, Any] = field(default_factory=dict)  # opset, torch version, source, hashes, task ...
    parity: tuple[ParityResult, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "parity", tuple(self.parity))
        if not self.inputs or not self.outputs:
            raise UserError("a signature needs at least one input and one output")
        names = [t.name for t in (*self.inputs, *self.outputs)]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise UserError(f"tensor names must be unique, repeated: {', '.join(dupes)}")
        if self.batch_axis is not None:
            for t in (*self.inputs, *self.outputs):
                if len(t.shape) <= self.batch_axis:
                    raise UserError(f"tensor '{t.name}' has no batch axis {self.batch_axis}")

    def tensor(self, name: str) -> TensorSpec:
        for t in (*self.inputs, *self.outputs):
            if t.name == name:
                return t
        raise UserError(f"the signature has no tensor named '{name}'")

    def to_json(self) -> dict[str, Any]:
        return {
            "format": SIGNATURE_FORMAT,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "batch_axis": self.batch_axis,
            "metadata": self.metadata,
            "parity": [
                {**asdict(p), "shapes": {k: list(v) for k, v in p.shapes.items()}} for p in self.parity
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Signature:
        return cls(
            inputs=tuple(TensorSpec.from_json(t) for t in data["inputs"]),
            outputs=tuple(TensorSpec.from_json(t) for t in data["outputs"]),
            batch_axis=data.get("batch_axis", 0),
            metadata=dict(data.get("metadata", {})),
            parity=tuple(
                ParityResult(
                    shapes={k: tuple(v) for k, v in p["shapes"].items()},
                    max_abs_error=float(p["max_abs_error"]),
                    max_rel_error=float(p["max_rel_error"]),
                    passed=bool(p["passed"]),
                )
                for p in data.get("parity", [])
            ),
        )


def _read_signature_bytes(path: Path) -> bytes:
    # The guarded reader: an export folder may come from anywhere (a regular file in its folder, bounded).
    try:
        return read_repository_file(path, path.parent, SETTINGS, SIGNATURE_FILE)
    except UnsafeFile as exc:
        if exc.reason == "missing":
            raise FileNotFoundError(str(exc)) from None
        raise ValueError(str(exc)) from None


def read_signature(path: Path) -> Signature:
    """Read ``signature.json`` (or the one beside an ONNX file); a bad file is a one-line UserError."""
    # Given a model file (model.onnx, model.source.onnx ...) or an export folder, read the one beside it.
    if path.is_dir():
        path = path / SIGNATURE_FILE
    elif path.suffix != ".json":
        path = path.with_name(SIGNATURE_FILE)
    try:
        data = loads_json(_read_signature_bytes(path), SIGNATURE_FILE)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if data.get("format") != SIGNATURE_FORMAT:
            raise ValueError(f"unsupported format {data.get('format')!r}, expected {SIGNATURE_FORMAT}")
        return Signature.from_json(data)
    except FileNotFoundError:
        raise UserError(f"{path}: no signature file; run 'repo-builder export' to write one") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{path}: not a valid signature file ({exc}); re-run 'repo-builder export'") from None


def write_signature(signature: Signature, path: Path) -> Path:
    if path.is_dir():
        path = path / SIGNATURE_FILE
    path.write_text(json.dumps(signature.to_json(), indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


@dataclass(frozen=True)
class ShapeRange:
    """A TensorRT optimization-profile entry for one input: full shapes including the batch axis."""

    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def __post_init__(self) -> None:
        if not (len(self.min) == len(self.opt) == len(self.max)):
            raise UserError(f"profile shapes differ in rank: {self.min} / {self.opt} / {self.max}")
        for lo, mid, hi in zip(self.min, self.opt, self.max, strict=True):
            if not (1 <= lo <= mid <= hi):
                raise UserError(f"profile needs 1 <= min <= opt <= max on every axis: {self.min} / {self.opt} / {self.max}")


@dataclass(frozen=True)
class Profile:
    """One optimization profile: input name -> shape range. Built as data: ``Profile().add(...)``."""

    shapes: tuple[tuple[str, ShapeRange], ...] = ()

    def add(self, name: str, min: tuple[int, ...], opt: tuple[int, ...], max: tuple[int, ...]) -> Profile:
        rest = tuple((n, r) for n, r in self.shapes if n != name)
        return Profile((*rest, (name, ShapeRange(tuple(min), tuple(opt), tuple(max)))))

    def __getitem__(self, name: str) -> ShapeRange:
        for n, r in self.shapes:
            if n == name:
                return r
        raise KeyError(name)

    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.shapes)


@dataclass(frozen=True)
class OnnxArtifact:
    """What export produces: the ONNX file, its signature, and files the pre/post steps need."""

    onnx_path: Path
    signature_path: Path
    signature: Signature
    tokenizer_dir: Path | None = None  # text models: the saved fast tokenizer (tokenizer.json ...)
    labels: tuple[str, ...] = ()  # class names in output order (id2label / ImageNet categories)


@dataclass(frozen=True)
class PlanArtifact:
    """What compile produces: a TensorRT plan and its ``plan.json`` sidecar."""

    plan_path: Path
    sidecar_path: Path
    signature: Signature
    compute_capability: str  # "8.6"
    tensorrt_version: str
    profiles: tuple[Profile, ...] = ()
