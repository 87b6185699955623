"""The float pipeline's answers on the accuracy data, kept beside the gated model step so the gate can run
again later against what the repository serves then (``pipelines/plan_gate.py``): numbers and strings in
an ``.npz`` read without pickle, one row per sample, refused samples marked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.guarded_read import FileKind, UnsafeFile, read_repository_file

Answer = Mapping[str, Any]
REFERENCE = FileKind("precision reference answers", 512 * 1024 * 1024)  # 1,000 samples x 384 floats is 1.5 MB
REFERENCE_FILE = "precision-reference.npz"  # in the model step's version folder, beside the model
_ANSWERED = "__answered__"


def save_reference(path: Path, answers: Sequence[Answer | None]) -> Path:
    """The float pipeline's answers, one row per sample (a refused sample: a zero row, marked unanswered)."""
    import numpy as np

    first = next(a for a in answers if a is not None)
    arrays: dict[str, Any] = {_ANSWERED: np.array([a is not None for a in answers])}
    for name, value in first.items():
        sample = np.asarray(value)
        rows = [np.asarray(a[name]) if a is not None else np.zeros_like(sample) for a in answers]
        try:
            stacked = np.stack(rows)
        except ValueError:  # rows of different shapes: kept as they are is not possible without pickle
            raise UserError(f"{path.name}: the float answers of output {name} differ in shape between samples; "
                            "the gate cannot keep them for a later run") from None
        if stacked.dtype == object:  # BYTES outputs: fixed-width bytes load without pickle
            stacked = stacked.astype(np.bytes_)
        arrays[name] = stacked
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        np.savez(handle, **arrays)
    return path


def load_reference(path: Path, root: Path) -> list[Answer | None]:
    """The answers ``save_reference`` wrote, read through the guarded reader (the repository may not be ours)."""
    import io

    import numpy as np

    try:
        with np.load(io.BytesIO(read_repository_file(path, root, REFERENCE)), allow_pickle=False) as data:
            answered = data[_ANSWERED]
            outputs = {name: data[name] for name in data.files if name != _ANSWERED}
    except (OSError, ValueError, KeyError, UnsafeFile) as exc:
        raise UserError(f"{path}: not the float answers a gated build writes ({exc}); rebuild with 'repo-builder build --precision'") from None
    return [({name: (v[i].astype(object) if v.dtype.kind == "S" else v[i]) for name, v in outputs.items()} if answered[i] else None)
            for i in range(len(answered))]
