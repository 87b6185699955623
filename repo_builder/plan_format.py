"""What a TensorRT plan says about itself: ``plan.json``, the plan file's header, and the engine.

Light on purpose: ``validate`` imports this to check configs against plans; TensorRT is imported only
inside ``read_engine``/``tensorrt_available`` (heavy, optional, GPU-only).

``plan.json`` is written beside the plans so validation needs neither a GPU nor TensorRT.

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
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repo_builder import dtypes
from repo_builder.compile_recipe import profile_from_json, profile_to_json
from repo_builder.errors import UserError
from repo_builder.fsutil import write_text_atomic
from repo_builder.guarded_read import PLAN, PLAN_HEADER, SIDECAR, UnsafeFile, loads_json, read_repository_file
from repo_builder.spec import Profile

SIDECAR_FILE = "plan.json"
SIDECAR_FORMAT = 1
DEFAULT_PLAN = "model.plan"
PER_CAPABILITY_PLAN = re.compile(r"^model_sm\d{2,3}\.plan$")
_CC = re.compile(r"^\d+\.\d+$")
# trtexec --getPlanVersionOnly (NVIDIA/TensorRT samples/common/sampleEngines.cpp, printPlanVersion, added in
# the 10.0 release and unchanged through main/11.1): a plan starts with the little-endian uint32 tag
# 0x74727466 ("ftrt"), then a uint32 serialization layout; for layout 0, bytes 24..27 are the TensorRT
# major.minor.patch.build that built it. Anything else is reported as unknown: NVIDIA documents no other
# layout, and TensorRT 8.x plans carry only a "serialized engine version" number with no public mapping to
# releases (NVIDIA/TensorRT issue 3073).
PLAN_FILE_TAG = 0x74727466
_HEADER_BYTES = 28


def is_compute_capability(text: str) -> bool:
    return bool(_CC.match(text))


def capability_from_sm(name: str) -> str | None:
    """'model_sm90.plan' -> '9.0'; 'sm_120' -> '12.0' (Blackwell has two-digit majors)."""
    m = re.search(r"sm_?(\d{2,3})(?!\d)", name)
    if not m:
        return None
    digits = m.group(1)
    return f"{digits[:-1]}.{digits[-1]}"


def plan_filename(compute_capability: str, per_capability: bool) -> str:
    """``model.plan``, or ``model_sm90.plan`` for a per-capability repository (cc_model_filenames)."""
    if not per_capability:
        return DEFAULT_PLAN
    return f"model_sm{compute_capability.replace('.', '')}.plan"


def header_tensorrt_version(header: bytes) -> str | None:
    """The TensorRT version a plan's first 28 bytes record (as trtexec --getPlanVersionOnly reads it), or None."""
    if len(header) < _HEADER_BYTES:
        return None
    tag, layout = struct.unpack_from("<II", header, 0)
    if tag != PLAN_FILE_TAG or layout != 0:
        return None
    major, minor, patch, build = header[24:28]
    return f"{major}.{minor}.{patch}.{build}" if major else None


def read_plan_header_version(path: Path, root: Path | None = None) -> str | None:
    """``header_tensorrt_version`` of a plan file inside ``root`` (default: its folder), read through the
    guarded reader (28 bytes, regular files only); None when it is unreadable or says nothing we know."""
    try:
        return header_tensorrt_version(read_repository_file(path, root if root is not None else path.parent, PLAN_HEADER))
    except UnsafeFile:
        return None


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


def read_sidecar(path: Path, root: Path | None = None) -> dict[str, PlanInfo]:
    """Plans described by a ``plan.json`` (or the one in a folder). A bad file is a one-line UserError.

    Read through the guarded reader: a regular file inside ``root`` (default: its own folder), at most
    16 MiB, JSON nested at most 64 deep; a link out of ``root`` is refused and never opened.
    """
    if root is None and path.is_dir():
        path = path / SIDECAR_FILE
    try:
        raw = read_repository_file(path, root if root is not None else path.parent, SIDECAR, SIDECAR_FILE)
    except UnsafeFile as exc:
        if exc.reason == "missing":
            raise UserError(f"{path}: no {SIDECAR_FILE}; rebuild the plan with 'repo-builder compile'") from None
        raise UserError(f"{path}: {exc}") from None
    return parse_sidecar(raw, path)


def parse_sidecar(raw: bytes, path: Path) -> dict[str, PlanInfo]:
    """The plans of a ``plan.json``'s bytes; a one-line UserError naming ``path`` when they are not valid."""
    try:
        data = loads_json(raw, SIDECAR_FILE)
        if not isinstance(data, dict) or data.get("format") != SIDECAR_FORMAT:
            raise ValueError(f"unsupported format {data.get('format') if isinstance(data, dict) else None!r}")
        return {str(name): PlanInfo.from_json(str(name), entry) for name, entry in data["plans"].items()}
    except (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError) as exc:
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



def profile_max_batch(profile: Profile) -> int:
    """Triton's rule: a profile supports the smallest max of axis 0 over its inputs."""
    return min((r.max[0] for _, r in profile.shapes if r.max), default=0)


def engine_max_batch(profiles: Sequence[Profile], used: Iterable[int] = (0,)) -> int:
    """Triton's max batch for an engine: the largest per-profile max batch over the profiles instances use
    (profile 0 when the config names none)."""
    best = 0
    for index in used:
        if 0 <= index < len(profiles):
            best = max(best, profile_max_batch(profiles[index]))
    return best



# --- the engine itself (TensorRT imported only here: heavy, optional, needs a GPU) -------------------


@dataclass(frozen=True)
class EngineDescription:
    """What a deserialized engine says about itself."""

    tensorrt_version: str
    profiles: tuple[Profile, ...]
    inputs: tuple[EngineTensor, ...]
    outputs: tuple[EngineTensor, ...]


def tensorrt_available() -> bool:
    """True when ``import tensorrt`` works (the PyPI placeholders raise on import, so catch everything)."""
    try:
        import tensorrt  # noqa: F401  (heavy optional dependency)
    except Exception:
        return False
    return True


def _dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "name", dtype)).removeprefix("DataType.")


def describe_engine(engine: Any, trt: Any) -> EngineDescription:
    """Engine IO (names, dtypes, shapes with -1 where dynamic) and every profile's input ranges."""
    inputs: list[EngineTensor] = []
    outputs: list[EngineTensor] = []
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    for name in names:
        tensor = EngineTensor(name, _dtype_name(engine.get_tensor_dtype(name)), tuple(int(d) for d in engine.get_tensor_shape(name)))
        (inputs if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else outputs).append(tensor)
    profiles = []
    for index in range(engine.num_optimization_profiles):
        profile = Profile()
        for t in inputs:
            if -1 not in t.shape:
                # A static input has no profile entry of its own; its range is its shape.
                profile = profile.add(t.name, t.shape, t.shape, t.shape)
                continue
            lo, mid, hi = engine.get_tensor_profile_shape(t.name, index)
            profile = profile.add(t.name, tuple(lo), tuple(mid), tuple(hi))
        profiles.append(profile)
    return EngineDescription(str(trt.__version__), tuple(profiles), tuple(inputs), tuple(outputs))


def read_engine(plan_path: Path, root: Path | None = None) -> EngineDescription:
    """Deserialize a plan inside ``root`` (default: its folder) on this machine's GPU and describe it (the
    validator's ground truth). The plan is read through the guarded reader (regular file, at most 4 GiB)."""
    try:
        data = read_repository_file(plan_path, root if root is not None else plan_path.parent, PLAN)
    except UnsafeFile as exc:
        raise UserError(f"{plan_path}: {exc}") from None
    import tensorrt as trt  # heavy optional dependency (the 'tensorrt' extra), GPU machines only

    logger = trt.Logger(trt.Logger.ERROR)
    engine = trt.Runtime(logger).deserialize_cuda_engine(data)
    if engine is None:
        raise UserError(
            f"{plan_path}: TensorRT {trt.__version__} cannot deserialize this plan "
            "(built by another TensorRT version or for another GPU)"
        )
    return describe_engine(engine, trt)
