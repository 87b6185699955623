"""English sentences for calibration and accuracy data, taken from the standard library's own docstrings:
real prose on every machine, offline, the same on every run (sorted, deduplicated)."""

from __future__ import annotations

import importlib
import inspect
import re

MODULES = ("argparse", "asyncio", "collections", "csv", "datetime", "decimal", "email.message", "functools", "http.client",
           "json", "logging", "os", "pathlib", "shutil", "socket", "sqlite3", "subprocess", "tarfile", "threading",
           "unittest", "urllib.request", "zipfile", "textwrap", "statistics", "random", "string", "heapq", "difflib")
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def _docstrings() -> list[str]:
    texts = []
    for name in MODULES:
        module = importlib.import_module(name)
        texts.append(inspect.getdoc(module) or "")
        for _, member in sorted(vars(module).items()):
            if (inspect.isfunction(member) or inspect.isclass(member)) and getattr(member, "__module__", "") == module.__name__:
                texts.append(inspect.getdoc(member) or "")
    return texts


def sentences(count: int, skip: int = 0) -> list[str]:
    """``count`` distinct sentences (40 to 300 characters) after the first ``skip``."""
    seen: dict[str, None] = {}
    for text in _docstrings():
        for sentence in _SPLIT.split(" ".join(text.split())):
            if 40 <= len(sentence) <= 300 and not any(c in sentence for c in "{}>|="):
                seen.setdefault(sentence)
    found = list(seen)
    if len(found) < skip + count:
        raise ValueError(f"only {len(found)} sentences in the standard library's docstrings, {skip + count} asked for")
    return found[skip:skip + count]
