"""What every pipeline shares: its settings, the model file it serves, and the names of its steps."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from repo_builder.errors import UserError
from repo_builder.nvcf import NvcfAssets
from repo_builder.render.context import (
    DEFAULT_MAX_IMAGE_PIXELS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_STEP_MEMORY_MIB,
    request_budget_context,
)
from repo_builder.spec import DEFAULT_MAX_BATCH_SIZE, Signature

RUNTIMES = ("tensorrt", "onnxruntime", "python")
# Full match (re.fullmatch): "name\n" must be refused; these names become folder names and config strings.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
MAX_NAME_LENGTH = 200
# Triton reads version folder names as int64 (core model_repository_manager.cc).
MAX_VERSION = 2**63 - 1


def check_name(name: str, option: str = "--name") -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise UserError(
            f"{option} {name!r}: use letters, digits, '_', '-' or '.' (at most {MAX_NAME_LENGTH}), "
            "not starting with '.' or '-'"
        )
    return name


def check_version(version: int | None) -> int | None:
    """``--version``: a version folder Triton can read (1 .. int64 max); None means the next free one."""
    if version is not None and not 1 <= version <= MAX_VERSION:
        raise UserError(f"--version must be between 1 and {MAX_VERSION} (Triton reads it as int64), got {version}")
    return version


@dataclass(frozen=True)
class PipelineSettings:
    """Settings of every step. ``top_k`` and ``draft_margin`` are read by the classification families only."""

    name: str  # the ensemble's name; members are <name>_preprocess, <name>_model, <name>_postprocess
    runtime: str  # resolved: tensorrt | onnxruntime | python
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    top_k: int = 5
    max_queue_delay_us: int = 100
    instance_count: int = 1  # model-step instances (issue 15: derived from the cores when the CLI is not told)
    # Pre/post (Python) step instances, decoupled from the model step's: one instance batches more requests
    # per execution and pays the Python backend's per-execution cost once for them (issue 15: one text
    # preprocessing instance cost 0.52 ms per text against 0.82 ms for two).
    step_instance_count: int = 1
    # The image step decodes JPEGs: a second instance keeps both cores decoding while the first one's batch
    # finishes (measured here on 12 MP photos: 36 vs 23 photos/s; on 500x375 JPEGs about the same).
    decode_instance_count: int = 1
    intra_op_threads: int = 0  # model-step ONNX Runtime intra-op threads per instance; 0 = cores // instances
    draft_margin: int = 2  # JPEG draft decoding keeps at least this many source pixels per output pixel
    nvcf: NvcfAssets | None = None  # build --nvcf-assets (families whose input is an encoded file)
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS  # image steps refuse more (width x height), read from the header
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # client-facing steps refuse a request whose inputs hold more
    step_memory_mib: int = DEFAULT_STEP_MEMORY_MIB  # per instance of such a step: the worst cases one execution admits

    def __post_init__(self) -> None:
        # The one place --max-batch-size, --name and --top-k are checked (the CLI relies on it).
        check_name(self.name)
        if self.runtime not in RUNTIMES:
            raise UserError(f"--runtime '{self.runtime}': expected one of {', '.join(RUNTIMES)}")
        if isinstance(self.max_batch_size, bool) or self.max_batch_size < 1:
            raise UserError(f"--max-batch-size must be >= 1 (every step batches dynamically), got {self.max_batch_size}")
        if self.top_k < 1:
            raise UserError(f"--top-k must be >= 1, got {self.top_k}")
        for count in (self.step_instance_count, self.decode_instance_count):
            if isinstance(count, bool) or count < 1:
                raise UserError(f"--step-instances must be >= 1, got {count}")
        if isinstance(self.max_image_pixels, bool) or self.max_image_pixels < 1:
            raise UserError(f"--max-image-pixels must be >= 1, got {self.max_image_pixels}")
        for flag, value in (("--max-request-bytes", self.max_request_bytes), ("--step-memory-mib", self.step_memory_mib)):
            if isinstance(value, bool) or value < 1:
                raise UserError(f"{flag} must be >= 1, got {value}")


def budget_context(settings: PipelineSettings, instances: int | None = None) -> dict[str, object]:
    """The request byte cap and memory budget a client-facing Python step is rendered with (model.py and README);
    ``instances``: that step's instance count (default: the pre/post steps')."""
    count = settings.step_instance_count if instances is None else instances
    return request_budget_context(settings.max_request_bytes, settings.step_memory_mib, settings.max_batch_size, count)


@dataclass(frozen=True)
class ModelSource:
    """The file Triton runs for the model step and its signature (a plan's own signature for TensorRT)."""

    signature: Signature
    files: Mapping[str, Path | bytes]  # version-folder name -> file (model.onnx, model.plan, plan.json ...)
    default_model_filename: str = "model.onnx"
    cc_model_filenames: Mapping[str, str] = field(default_factory=dict)


def step_names(name: str) -> dict[str, str]:
    """role -> model name; the ensemble carries the user's name since clients call it."""
    return {
        "preprocess": f"{name}_preprocess",
        "model": f"{name}_model",
        "postprocess": f"{name}_postprocess",
        "ensemble": name,
    }
