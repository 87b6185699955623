"""How ``--live`` can prove each model on the server at hand: load it, serve it through the ONNX Runtime
stand-in, or not at all (with the reason). Pure: decided from the scanned repository alone."""

from __future__ import annotations

from dataclasses import dataclass

from repo_builder.compat import StrEnum
from repo_builder.validate.records import ModelEntry, Repository

# Platform names and the backend that serves them (core src/constants.h, model_config_utils.cc).
PLATFORM_BACKENDS = {
    "tensorrt_plan": "tensorrt",
    "onnxruntime_onnx": "onnxruntime",
    "pytorch_libtorch": "pytorch",
    "torch_aoti": "pytorch",
    "tensorflow_graphdef": "tensorflow",
    "tensorflow_savedmodel": "tensorflow",
    "ensemble": "ensemble",
}
# Default model file names and their backend, for models whose config names neither (auto-complete).
FILE_BACKENDS = (
    ("model.plan", "tensorrt"),
    ("model.onnx", "onnxruntime"),
    ("model.pt", "pytorch"),
    ("model.pt2", "pytorch"),
    ("model.graphdef", "tensorflow"),
    ("model.savedmodel", "tensorflow"),
    ("model.xml", "openvino"),
    ("model.py", "python"),
    ("model.dali", "dali"),
)
EMBEDDED_BACKENDS = frozenset({"python", "ensemble"})


class Route(StrEnum):
    LOAD = "load"  # the server at hand has the backend
    STAND_IN = "stand-in"  # ONNX Runtime through the stand-in
    UNPROVEN = "unproven"  # cannot be loaded here


@dataclass(frozen=True)
class ModelRoute:
    name: str
    route: Route
    backend: str | None
    reason: str | None = None  # why UNPROVEN


def model_backend(model: ModelEntry) -> str | None:
    """The backend Triton would use: the config's ``backend``, its ``platform``'s, or the model file's."""
    config = model.config
    if config is not None and config.backend:
        return config.backend
    if config is not None and config.platform:
        return PLATFORM_BACKENDS.get(config.platform, config.platform)
    numbered = sorted((v for v in model.versions if v.number is not None and v.ignored is None), key=lambda v: v.name)
    if not numbered:
        return None
    first = numbered[0]  # auto-detection looks at the lexicographically first version folder only
    for file_name, backend in FILE_BACKENDS:
        if first.has(file_name):
            return backend
    return None


def _direct_route(model: ModelEntry, embedded: bool, remote: bool) -> ModelRoute:
    backend = model_backend(model)
    if not embedded or backend is None or backend in EMBEDDED_BACKENDS:
        return ModelRoute(model.name, Route.LOAD, backend)
    if backend == "onnxruntime" and not remote:
        return ModelRoute(model.name, Route.STAND_IN, backend)
    if backend == "onnxruntime":
        why = "the ONNX Runtime stand-in needs a local copy of the repository (repo-builder pull it first)"
    else:
        why = f"the embedded Triton has no '{backend}' backend (only the Python backend)"
    return ModelRoute(
        model.name,
        Route.UNPROVEN,
        backend,
        f"{why}; run --live with --tritonserver PATH of a full Triton on the target hardware",
    )


def plan_routes(
    repository: Repository, *, embedded: bool, remote: bool = False, no_image_python: str | None = None, no_stand_in: str | None = None
) -> dict[str, ModelRoute]:
    """One route per model; an ensemble using an unproven model (at any depth) is unproven too.
    ``no_image_python``: why the target image's Python cannot run here; every model that would run on a
    Python stub (Python steps and ONNX Runtime stand-ins) is then unproven, never passed on another Python;
    ``no_stand_in``: why the stand-in cannot run here (its ONNX Runtime models are then unproven)."""
    routes = {m.name: _direct_route(m, embedded, remote) for m in repository.models}
    for name, route in list(routes.items()):
        if no_image_python is not None and (route.route == Route.STAND_IN or (route.route == Route.LOAD and route.backend == "python")):
            routes[name] = ModelRoute(name, Route.UNPROVEN, route.backend, no_image_python)
        elif no_stand_in is not None and route.route == Route.STAND_IN:
            routes[name] = ModelRoute(name, Route.UNPROVEN, route.backend, no_stand_in)
    changed = True
    while changed:  # propagate through nested ensembles until nothing changes
        changed = False
        for model in repository.models:
            if not model.is_ensemble or routes[model.name].route == Route.UNPROVEN:
                continue
            blocked = sorted(n for n in step_models(model) if n in routes and routes[n].route == Route.UNPROVEN)
            if blocked:
                routes[model.name] = ModelRoute(
                    model.name,
                    Route.UNPROVEN,
                    "ensemble",
                    f"ensemble '{model.name}' uses {', '.join(repr(n) for n in blocked)}, not proven live here",
                )
                changed = True
    return routes


def step_models(model: ModelEntry) -> set[str]:
    if model.config is None:
        return set()
    return {s.model_name for s in model.config.ensemble_scheduling.step}
