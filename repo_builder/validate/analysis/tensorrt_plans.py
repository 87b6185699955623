"""What each TensorRT plan of a model says about itself, for the RB7xx rules.

Sources, best first: the engine (deserialized, only on a machine with a GPU and TensorRT, and only the plan
Triton would load on that GPU), the ``plan.json`` sidecar repo-builder writes, the plan file's header (the
TensorRT version only). Which plan Triton loads depends on the GPU: the tensorrt backend takes
``cc_model_filenames["<major>.<minor>"]`` of the GPU it runs on, else ``default_model_filename``, else
``model.plan`` (tensorrt_backend ``src/model_state.cc`` / core ``model_config_utils.cc``). A plan built for
another GPU generation does not deserialize here and Triton would never load it here either, so it is
described from its sidecar instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, cast

from repo_builder.errors import UserError
from repo_builder.gpu import detect_gpus
from repo_builder.plan_format import (
    DEFAULT_PLAN,
    SIDECAR_FILE,
    PlanInfo,
    read_engine,
    read_plan_header_version,
    read_sidecar,
    tensorrt_available,
)
from repo_builder.validate.records import ModelEntry, VersionDir

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelInput, ModelOutput


@dataclass(frozen=True)
class PlanFacts:
    version: VersionDir
    filename: str
    info: PlanInfo | None
    problem: str | None = None  # plan.json unreadable, or the engine would not deserialize
    source: str = "plan.json"  # "plan.json" | "engine" | "header" | "none"
    header_version: str | None = None  # TensorRT version in the plan file's header, when readable

    @property
    def path(self) -> Path:
        return self.version.path / self.filename

    @property
    def tensorrt_version(self) -> str | None:
        return self.info.tensorrt_version if self.info is not None else self.header_version


def is_tensorrt(model: ModelEntry) -> bool:
    c = model.config
    return c is not None and (c.platform == "tensorrt_plan" or c.backend == "tensorrt")


def loadable_versions(model: ModelEntry) -> tuple[VersionDir, ...]:
    return tuple(v for v in model.versions if v.number is not None)


def plan_names(model: ModelEntry) -> tuple[str, ...]:
    """Every plan file the config can make Triton load, default first."""
    assert model.config is not None
    default = model.config.default_model_filename or DEFAULT_PLAN
    names = [default]
    names += [name for _, name in sorted(model.config.cc_model_filenames.items()) if name not in names]
    return tuple(dict.fromkeys(names))


def plan_for_capability(model: ModelEntry, capability: str) -> str:
    """The plan file Triton loads on a GPU of this compute capability."""
    assert model.config is not None
    return model.config.cc_model_filenames.get(capability) or model.config.default_model_filename or DEFAULT_PLAN


def used_profiles(model: ModelEntry) -> tuple[int, ...]:
    assert model.config is not None
    used = {int(p) for g in model.config.instance_group for p in g.profile if p.strip().isdigit()}
    return tuple(sorted(used)) or (0,)


def config_dims(io: ModelInput | ModelOutput) -> list[int]:
    return list(io.reshape.shape) if io.HasField("reshape") else list(io.dims)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=256)
def _sidecar(path: str, root: str, stamp: tuple[int, int] | None) -> tuple[dict[str, PlanInfo] | None, str | None]:
    # The guarded reader: a link out of the repository, a FIFO or /dev/zero is a problem, never opened.
    try:
        return read_sidecar(Path(path), Path(root)), None
    except UserError as exc:
        return None, str(exc)


@lru_cache(maxsize=64)
def _engine(path: str, stamp: tuple[int, int] | None, capability: str) -> tuple[PlanInfo | None, str | None]:
    try:
        d = read_engine(Path(path))  # guarded: a regular file, never a link out of its folder
    except UserError as exc:
        return None, str(exc)
    # It deserialized on this GPU, so this GPU's capability is the one it was built for.
    return PlanInfo(Path(path).name, d.tensorrt_version, capability, d.profiles, d.inputs, d.outputs, io_source="engine"), None


@lru_cache(maxsize=1)
def engine_capabilities() -> frozenset[str]:
    """Compute capabilities of this machine's GPUs when TensorRT can deserialize plans here, else none.

    This machine, not the deploy target (``ValidateOptions.gpu_present``): a plan deserializes only on a
    real GPU with TensorRT installed. Asked once per process (``import tensorrt`` and nvidia-smi are slow).
    """
    if not tensorrt_available():
        return frozenset()
    return frozenset(g.compute_capability for g in detect_gpus())


def _describe(v: VersionDir, name: str, plans: dict[str, PlanInfo] | None, problem: str | None, on_gpu: dict[str, str]) -> PlanFacts:
    path = v.path / name
    if name in on_gpu:
        info, engine_problem = _engine(str(path), _stamp(path), on_gpu[name])
        return PlanFacts(v, name, info, engine_problem, "engine")
    info = plans.get(name) if plans else None
    if info is not None or problem:
        return PlanFacts(v, name, info, problem)
    header = read_plan_header_version(path, v.path.parent.parent)
    return PlanFacts(v, name, None, None, "header" if header else "none", header)


def _plan_facts(model: ModelEntry, capabilities: frozenset[str]) -> tuple[PlanFacts, ...]:
    on_gpu = {plan_for_capability(model, cc): cc for cc in sorted(capabilities)}
    out = []
    for v in loadable_versions(model):
        plans, problem = (None, None)
        if v.has(SIDECAR_FILE):
            sidecar_path = v.path / SIDECAR_FILE
            plans, problem = _sidecar(str(sidecar_path), str(model.path.parent), _stamp(sidecar_path))
        out += [_describe(v, name, plans, problem, on_gpu) for name in plan_names(model) if v.has(name)]
    return tuple(out)


def plan_facts(model: ModelEntry) -> tuple[PlanFacts, ...]:
    """The plans present in each loadable version, with what is known about each (computed once per model)."""
    capabilities = engine_capabilities()
    key = ("tensorrt_plan_facts", capabilities)
    facts = model.facts
    if key not in facts:
        facts[key] = _plan_facts(model, capabilities)
    return cast("tuple[PlanFacts, ...]", facts[key])  # put there by the line above

