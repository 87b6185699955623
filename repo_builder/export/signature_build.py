"""Build signature.json from the ONNX file itself plus what export knows (task, source, parity)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from repo_builder.errors import InternalError
from repo_builder.export.exporter import EXPORTER, EXPORTER_WHY
from repo_builder.export.onnx_reader import read_onnx_io
from repo_builder.fsutil import sha256_file
from repo_builder.spec import ParityResult, Signature

LABELS_FILE = "labels.txt"
ONNX_FILE = "model.onnx"


def package_versions(*names: str) -> dict[str, str]:
    """Installed versions by distribution name (a missing one is recorded as 'absent')."""
    versions: dict[str, str] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


def build_signature(
    onnx_path: Path,
    *,
    intended_axes: Mapping[str, Mapping[int, str]],
    metadata: Mapping[str, Any],
    parity: Iterable[ParityResult] = (),
    batch_axis: int = 0,
) -> Signature:
    """Read IO from ``onnx_path`` and check the symbolic axes the exporter was asked for are really there."""
    io = read_onnx_io(onnx_path)
    for tensor in (*io.inputs, *io.outputs):
        for axis, name in intended_axes.get(tensor.name, {}).items():
            if axis >= len(tensor.shape) or tensor.shape[axis] != name:
                raise InternalError(
                    f"{onnx_path}: '{tensor.name}' axis {axis} should be the dynamic axis '{name}', "
                    f"the file says {tensor.shape}"
                )
    full_metadata = {
        **metadata,
        "opset": io.opset,
        "exporter": {"name": EXPORTER, "why": EXPORTER_WHY},
        **{key: value for key, value in package_versions("torch", "onnx", "onnxruntime").items()},
        "onnx_file": onnx_path.name,
        "onnx_sha256": sha256_file(onnx_path),
        "labels_file": LABELS_FILE,
    }
    return Signature(
        inputs=io.inputs,
        outputs=io.outputs,
        batch_axis=batch_axis,
        metadata=full_metadata,
        parity=tuple(parity),
    )


def write_labels(labels: Iterable[str], path: Path) -> tuple[str, ...]:
    """One label per line, in output order; newlines inside a label would shift every later class."""
    cleaned = tuple(str(label).replace("\r", " ").replace("\n", " ").strip() for label in labels)
    path.write_text("".join(f"{label}\n" for label in cleaned), encoding="utf-8")
    return cleaned
