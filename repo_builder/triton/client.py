"""Talk to a running tritonserver over gRPC: load/unload in explicit mode, list models, infer.

``tritonclient.grpc`` (and numpy) are imported inside the functions: ``repo-builder validate`` imports
nothing from here unless ``--live`` is asked for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from repo_builder import dtypes
from repo_builder.errors import require
from repo_builder.signals import signals_deferred

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class LoadOutcome:
    """What one explicit-mode load request came back with."""

    name: str
    loaded: bool
    reason: str | None = None  # the server's message when it refused
    timed_out: bool = False  # no answer within the timeout (the server may be hung on this model)


@dataclass(frozen=True)
class ModelState:
    """One row of the server's repository index."""

    name: str
    version: str
    state: str  # READY, UNAVAILABLE, LOADING, UNLOADING, or "" when never loaded
    reason: str


def grpc_module() -> Any:
    return require("tritonclient.grpc", "serve", "talking to tritonserver")


def connect(url: str) -> Any:
    """A ``tritonclient.grpc.InferenceServerClient`` for ``host:port``, never through an HTTP proxy."""
    limit = 2**31 - 1  # tritonclient's own defaults, which passing channel_args replaces
    channel_args = [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        ("grpc.enable_http_proxy", 0),  # an http_proxy in the environment must not catch loopback calls
    ]
    grpc = grpc_module()
    # An interrupt inside the constructor leaves a half-built client whose __del__ then prints a traceback: the
    # signal is raised right after it instead.
    with signals_deferred():
        return grpc.InferenceServerClient(url=url, channel_args=channel_args)


def error_text(exc: BaseException) -> str:
    """The server's own message from a tritonclient exception, on one line."""
    message = exc.message() if hasattr(exc, "message") and callable(exc.message) else str(exc)
    return " ".join(str(message or exc).split())


def is_deadline(exc: BaseException) -> bool:
    status = exc.status() if hasattr(exc, "status") and callable(exc.status) else None
    text = f"{status} {exc}".lower()
    return "deadline" in text


def load_model(client: Any, name: str, timeout: float | None) -> LoadOutcome:
    """Ask the server to load ``name`` (explicit mode); never raises for the server's refusal."""
    from tritonclient.utils import InferenceServerException

    try:
        client.load_model(name, client_timeout=timeout)
    except InferenceServerException as exc:
        if is_deadline(exc):
            return LoadOutcome(name, False, f"no answer within {timeout:g} s while loading '{name}'", True)
        return LoadOutcome(name, False, error_text(exc) or f"failed to load '{name}'")
    return LoadOutcome(name, True)


def unload_model(client: Any, name: str, timeout: float | None = 30.0) -> None:
    from tritonclient.utils import InferenceServerException

    with contextlib.suppress(InferenceServerException):  # not loaded, or already gone: nothing to undo
        client.unload_model(name, client_timeout=timeout)


def repository_index(client: Any, timeout: float | None = 30.0) -> tuple[ModelState, ...]:
    index = client.get_model_repository_index(client_timeout=timeout)
    return tuple(ModelState(m.name, m.version, m.state, m.reason) for m in index.models)


def infer_model(
    client: Any,
    name: str,
    inputs: Mapping[str, np.ndarray],
    *,
    datatypes: Mapping[str, str] | None = None,
    outputs: Sequence[str] | None = None,
    timeout: float | None = 60.0,
) -> dict[str, np.ndarray]:
    """Send one request; return every output (or those named) as numpy arrays.

    ``datatypes`` maps an input to its wire type (``FP32``, ``BYTES``, ``BF16``...) where the array's
    dtype does not say it (bfloat16 is sent from a float32 array).
    """
    grpc = grpc_module()
    requests = []
    for key, array in inputs.items():
        wire = (datatypes or {}).get(key)
        if wire is None:
            wire = "BYTES" if array.dtype.kind in "OSU" else dtypes.from_numpy(array.dtype.name).wire
        tensor = grpc.InferInput(key, list(array.shape), wire)
        tensor.set_data_from_numpy(array)
        requests.append(tensor)
    wanted = [grpc.InferRequestedOutput(o) for o in outputs] if outputs else None
    result = client.infer(name, requests, outputs=wanted, client_timeout=timeout)
    names = list(outputs) if outputs else [o.name for o in result.get_response().outputs]
    return {o: result.as_numpy(o) for o in names}
