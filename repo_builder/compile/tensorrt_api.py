"""Build and read plans with TensorRT's Python API (``tensorrt``, imported only inside these functions).

Written against the documented API of TensorRT 10 and 11: ``Builder.create_network`` (STRONGLY_TYPED
flag on 10; 11 is strongly typed by default), ``OnnxParser.parse_from_file`` and its errors,
``IBuilderConfig`` (flags, memory pool limit, optimization level, timing cache), ``build_serialized_network``,
and the name-based engine IO API (``num_io_tensors``, ``get_tensor_mode/dtype/shape``,
``get_tensor_profile_shape``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.compile.precision import PrecisionPlan
from repo_builder.compile.settings import CompileSettings
from repo_builder.compile.sidecar import EngineTensor
from repo_builder.errors import UserError, require
from repo_builder.fsutil import write_bytes_atomic
from repo_builder.spec import Profile


@dataclass(frozen=True)
class ParserError:
    description: str
    node_index: int = -1
    node_name: str = ""
    operator: str = ""


@dataclass(frozen=True)
class EngineDescription:
    """What the built engine says about itself."""

    tensorrt_version: str
    profiles: tuple[Profile, ...]
    inputs: tuple[EngineTensor, ...]
    outputs: tuple[EngineTensor, ...]


def tensorrt_available() -> bool:
    """True when ``import tensorrt`` works (the PyPI placeholders raise on import, so catch everything)."""
    try:
        import tensorrt  # noqa: F401
    except Exception:
        return False
    return True


def _trt() -> Any:
    return require("tensorrt", "tensorrt", "building TensorRT plans with the Python API")


def tensorrt_version() -> str:
    return str(_trt().__version__)


def format_parser_errors(onnx_path: Path, errors: Sequence[ParserError]) -> str:
    """One line naming the failing nodes, e.g. ``node 12 'Resize_3' (Resize): unsupported mode``."""
    parts = []
    for e in errors:
        where = f"node {e.node_index}" if e.node_index >= 0 else "graph"
        if e.node_name:
            where += f" '{e.node_name}'"
        if e.operator:
            where += f" ({e.operator})"
        parts.append(f"{where}: {e.description.strip()}")
    more = f" (and {len(parts) - 3} more)" if len(parts) > 3 else ""
    return f"{onnx_path}: TensorRT's ONNX parser failed: " + "; ".join(parts[:3]) + more


def _parser_errors(parser: Any) -> list[ParserError]:
    out = []
    for i in range(parser.num_errors):
        err = parser.get_error(i)
        # node_name()/node_operator() exist from TensorRT 8.6 on; keep working if a build lacks them.
        name = err.node_name() if hasattr(err, "node_name") else ""
        op = err.node_operator() if hasattr(err, "node_operator") else ""
        out.append(ParserError(str(err.desc()), int(err.node()), str(name or ""), str(op or "")))
    return out


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


def _load_timing_cache(config: Any, path: Path | None) -> Any:
    data = path.read_bytes() if path is not None and path.is_file() else b""
    cache = config.create_timing_cache(data)
    config.set_timing_cache(cache, ignore_mismatch=False)
    return cache


def _save_timing_cache(config: Any, path: Path) -> None:
    blob = bytes(memoryview(config.get_timing_cache().serialize()))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, blob)


def build_engine(
    onnx_path: Path,
    plan_path: Path,
    profiles: Sequence[Profile],
    dynamic_inputs: Sequence[str],
    precision: PrecisionPlan,
    settings: CompileSettings,
) -> EngineDescription:
    """Parse, configure, build, write ``plan_path``; then describe the engine as deserialized."""
    trt = _trt()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 0
    if precision.strongly_typed and precision.tensorrt_major <= 10:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        raise UserError(format_parser_errors(onnx_path, _parser_errors(parser)))
    config = builder.create_builder_config()
    for flag in precision.flags:
        config.set_flag(getattr(trt.BuilderFlag, flag))
    if settings.workspace_mib is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, settings.workspace_mib << 20)
    if settings.opt_level is not None:
        config.builder_optimization_level = settings.opt_level
    if dynamic_inputs:
        for p in profiles:
            profile = builder.create_optimization_profile()
            for name, r in p.shapes:
                if name in dynamic_inputs:
                    profile.set_shape(name, r.min, r.opt, r.max)
            config.add_optimization_profile(profile)
    _load_timing_cache(config, settings.timing_cache)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise UserError(f"{onnx_path}: TensorRT could not build an engine (see the TensorRT log above)")
    plan_path.write_bytes(bytes(memoryview(serialized)))
    if settings.timing_cache is not None:
        _save_timing_cache(config, settings.timing_cache)
    runtime = trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(plan_path.read_bytes())
    if engine is None:
        raise UserError(f"{plan_path}: the plan just built does not deserialize")
    return describe_engine(engine, trt)


def read_engine(plan_path: Path) -> EngineDescription:
    """Deserialize a plan on this machine's GPU and describe it (the validator's ground truth)."""
    trt = _trt()
    logger = trt.Logger(trt.Logger.ERROR)
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan_path.read_bytes())
    if engine is None:
        raise UserError(
            f"{plan_path}: TensorRT {trt.__version__} cannot deserialize this plan "
            "(built by another TensorRT version or for another GPU)"
        )
    return describe_engine(engine, trt)
