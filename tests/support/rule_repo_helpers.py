"""Small model builders for the config, batching and ensemble rule tests (RB2xx, RB3xx, RB5xx).

Models use the Python backend with a minimal ``model.py`` (no ``auto_complete_config``, so what the
config says is final) or the ``identity`` backend (reads no model file), so only the rule under test
speaks.
"""

from __future__ import annotations

from pathlib import Path

from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Diagnostic, Severity, ValidateOptions
from repo_builder.validate.report import Report

MODEL_PY = """\
class TritonPythonModel:
    def execute(self, requests):
        return []
"""

IO = """\
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""


def write_model(root: Path, name: str, config: str, files: dict[str, str | bytes] | None = None) -> Path:
    """``root/name/config.pbtxt`` plus files relative to the model folder (``1/model.py`` ...)."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(config, encoding="utf-8")
    for rel, content in (files or {}).items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    if not any(p.is_dir() for p in folder.iterdir()):
        (folder / "1").mkdir()
    return folder


def python_model(
    root: Path, name: str, body: str = IO, max_batch_size: int = 0, files: dict | None = None
) -> Path:
    """A Python-backend model whose config is ``body`` plus name, backend and max_batch_size."""
    config = f'name: "{name}"\nbackend: "python"\nmax_batch_size: {max_batch_size}\n{body}'
    return write_model(root, name, config, {"1/model.py": MODEL_PY, **(files or {})})


def identity_model(root: Path, name: str, body: str, max_batch_size: int = 0) -> Path:
    """An identity-backend model (the backend Triton's own ensemble tests use for members)."""
    config = f'name: "{name}"\nbackend: "identity"\nmax_batch_size: {max_batch_size}\n{body}'
    return write_model(root, name, config)


def validate(root: Path, **options: object) -> Report:
    return validate_repository(root, ValidateOptions(**options))


def found(report: Report, code: str, model: str | None = None) -> list[Diagnostic]:
    """The diagnostics of one rule code (on one model when given)."""
    return [d for d in report.diagnostics if d.code == code and (model is None or d.model == model)]


def errors(report: Report, model: str | None = None) -> list[Diagnostic]:
    return [
        d for d in report.diagnostics if d.severity == Severity.ERROR and (model is None or d.model == model)
    ]
