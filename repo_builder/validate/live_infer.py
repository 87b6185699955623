"""One request synthesized from an ensemble's config, sent to the live server."""

from __future__ import annotations

from repo_builder.triton.client import error_text
from repo_builder.triton.errors import ServerError
from repo_builder.triton.server import TritonServer
from repo_builder.triton.synthesize import synthesize_inputs
from repo_builder.validate.records import ModelEntry


def infer_once(server: TritonServer, model: ModelEntry) -> tuple[bool, str | None]:
    """Send one synthesized request; (answered, the server's message when it did not)."""
    assert model.config is not None  # an ensemble that loaded: its platform comes from its config
    inputs = synthesize_inputs(model.config)
    try:
        server.infer(
            model.name,
            {i.name: i.array for i in inputs},
            datatypes={i.name: i.wire for i in inputs},
            timeout=60.0,
        )
    except ServerError as exc:
        return False, f"tritonserver died while answering: {exc}"
    except Exception as exc:  # tritonclient's error for a refused request: its message is the answer
        return False, error_text(exc)
    return True, None
