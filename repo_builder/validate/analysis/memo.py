"""Keep a derived fact on the (frozen) model entry, computed once: dozens of rules ask for the same."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from repo_builder.validate.records import ModelEntry

T = TypeVar("T")


def model_fact(model: ModelEntry, key: Hashable, compute: Callable[[ModelEntry], T]) -> T:
    """``compute(model)``, kept in ``model.facts`` under ``key`` (the entry is frozen: never stale)."""
    facts = model.facts
    value = facts.get(key)
    if value is None:
        value = facts[key] = compute(model)
    return value
