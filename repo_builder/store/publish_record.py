"""The publish record: a file at the root of a published repository (Triton takes only folders as models)
saying "publishing" while a publish changes the store and "complete" once it is whole. An interrupted
publish leaves "publishing" behind, so a half-new repository is reported as such instead of passing for a
new one. ``repo-builder publish`` writes it; validate and pull read it.
"""

from __future__ import annotations

import json
from typing import Any

from repo_builder.store.fsspec_store import Listing, ObjectStore

PUBLISH_STATE_FILE = "repo-builder-publish.json"
STATE_PUBLISHING = "publishing"
STATE_COMPLETE = "complete"


def read_publish_state(store: ObjectStore, listing: Listing | None = None) -> dict[str, Any] | None:
    """The publish record below the prefix, or None when there is none (a repository put there by hand)."""
    files = (listing or store.listing()).files
    if PUBLISH_STATE_FILE not in files:
        return None
    raw = store.read_bytes(PUBLISH_STATE_FILE)
    try:
        data = json.loads(raw)
    except ValueError:
        return {"state": "unreadable"}
    return data if isinstance(data, dict) else {"state": "unreadable"}


def interrupted_publish(state: dict[str, Any] | None) -> str | None:
    """One sentence when the record says a publish did not finish, else None."""
    if state is None or state.get("state") == STATE_COMPLETE:
        return None
    started = state.get("started", "at an unknown time")
    return (
        f"a publish started {started} did not finish (its record says '{state.get('state')}'): the repository "
        "may mix old and new files; run the publish again"
    )
