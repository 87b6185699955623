"""One request to an ensemble on the live server (``request.plan_request``), and its answer checked."""

from __future__ import annotations

from dataclasses import dataclass

from repo_builder.live.request import LiveRequest, check_answer
from repo_builder.triton.client import error_text
from repo_builder.triton.errors import ServerError
from repo_builder.triton.server import TritonServer
from repo_builder.validate.records import ModelEntry


@dataclass(frozen=True)
class InferOutcome:
    answered: bool
    error: str | None = None  # the server's message when it did not answer
    wrong_answer: str | None = None  # how the answer differs from the config, or fails the family's check


def infer_once(server: TritonServer, model: ModelEntry, request: LiveRequest) -> InferOutcome:
    """Send ``request``; whether it was answered, and what is wrong with the answer."""
    try:
        answer = server.infer(model.name, dict(request.inputs), datatypes=dict(request.datatypes), timeout=60.0)
    except ServerError as exc:
        return InferOutcome(False, f"tritonserver died while answering: {exc}")
    except Exception as exc:  # tritonclient's error for a refused request: its message is the answer
        return InferOutcome(False, error_text(exc))
    problem = check_answer(model.config, answer, request.batch)
    if problem is None and request.check is not None:
        problem = request.check(answer)
    return InferOutcome(True, wrong_answer=problem)
