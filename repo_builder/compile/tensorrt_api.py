"""Build and read plans with TensorRT's Python API (``tensorrt``, imported only inside these functions).

Written against the documented API of TensorRT 10 and 11: ``Builder.create_network`` (STRONGLY_TYPED
flag on 10; 11 is strongly typed by default), ``OnnxParser.parse_from_file`` and its errors,
``IBuilderConfig`` (flags, memory pool limit, optimization level, timing cache), ``build_serialized_network``,
and the name-based engine IO API (``num_io_tensors``, ``get_tensor_mode/dtype/shape``,
``get_tensor_profile_shape``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.compile.precision import PrecisionChoice
from repo_builder.compile_recipe import CompileSettings
from repo_builder.errors import UserError, require
from repo_builder.fsutil import write_bytes_atomic
from repo_builder.plan_format import EngineDescription, describe_engine
from repo_builder.spec import Profile

Log = Callable[[str], None]


@dataclass(frozen=True)
class ParserError:
    description: str
    node_index: int = -1
    node_name: str = ""
    operator: str = ""


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


def load_timing_cache(config: Any, path: Path | None, log: Log) -> bool:
    """Give the builder the cache at ``path`` (or an empty one); False when TensorRT refused the file.

    ``set_timing_cache`` returns False for a cache recorded on another device or TensorRT version
    (``ignore_mismatch=False``): that is said, the build goes on with an empty cache, and the file is left
    as it was rather than overwritten with this device's timings.
    """
    data = path.read_bytes() if path is not None and path.is_file() else b""
    if config.set_timing_cache(config.create_timing_cache(data), ignore_mismatch=False):
        return True
    log(
        f"timing cache {path} was recorded on another GPU or TensorRT version; building without it and "
        "leaving the file unchanged (keep one --timing-cache per GPU type and TensorRT version)"
    )
    if not config.set_timing_cache(config.create_timing_cache(b""), ignore_mismatch=False):
        raise UserError("TensorRT refused an empty timing cache; run without --timing-cache")
    return False


def _save_timing_cache(config: Any, path: Path) -> None:
    blob = bytes(memoryview(config.get_timing_cache().serialize()))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, blob)


def _builder_config(
    trt: Any, builder: Any, profiles: Sequence[Profile], dynamic_inputs: Sequence[str], precision: PrecisionChoice, settings: CompileSettings
) -> Any:
    """Precision flags (TensorRT 10), memory pool, optimization level and one optimization profile per ``profiles``."""
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
    return config


def build_engine(
    onnx_path: Path,
    plan_path: Path,
    profiles: Sequence[Profile],
    dynamic_inputs: Sequence[str],
    precision: PrecisionChoice,
    settings: CompileSettings,
    log: Log,
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
    config = _builder_config(trt, builder, profiles, dynamic_inputs, precision, settings)
    cache_usable = load_timing_cache(config, settings.timing_cache, log)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise UserError(f"{onnx_path}: TensorRT could not build an engine (see the TensorRT log above)")
    plan_path.write_bytes(bytes(memoryview(serialized)))
    if settings.timing_cache is not None and cache_usable:
        _save_timing_cache(config, settings.timing_cache)
    runtime = trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(plan_path.read_bytes())
    if engine is None:
        raise UserError(f"{plan_path}: the plan just built does not deserialize")
    return describe_engine(engine, trt)
