"""What ``build`` may do to ``--out``: never write into an unrelated folder, never change by accident the
API that clients call.

A polling Triton serves whatever lands in the repository: a rebuild that turns an ensemble's ``TEXT``
input into ``IMAGE`` would be served at once to clients that still send text. So build compares the new
ensemble's inputs and outputs (names, data types, dims) with the ones already in ``--out`` and refuses a
difference unless ``--replace`` says it is intended. A new version with the same signature is the
ordinary retrain-and-rebuild, and goes through.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import RefusedError, UserError
from repo_builder.render.parse_back import parse_config
from repo_builder.render.rendered import RenderedModel
from repo_builder.triton_layout import CONFIG_FILE

MANIFEST_FILE = "repo-builder.json"  # repository/manifest.py's; not imported: that module writes it
MAX_CONFIG_BYTES = 4 << 20
# What build itself leaves beside the models (its lock and stage folders start with a dot).
_OWN_PREFIXES = (".repo-builder",)


def _is_model_folder(path: Path) -> bool:
    if not path.is_dir() or path.is_symlink():
        return False
    return (path / CONFIG_FILE).is_file() or any(p.is_dir() and p.name.isdigit() for p in path.iterdir())


def check_out_folder(out: Path) -> None:
    """Refuse, before any export, an ``--out`` that is a folder, not empty, and holds no model repository
    (no ``repo-builder.json``, no model folder with a config or a version folder)."""
    if not out.is_dir():
        return
    entries = [p for p in out.iterdir() if not p.name.startswith(_OWN_PREFIXES)]
    if not entries or (out / MANIFEST_FILE).is_file() or any(_is_model_folder(p) for p in entries):
        return
    shown = ", ".join(sorted(p.name + ("/" if p.is_dir() else "") for p in entries)[:3])
    more = f" and {len(entries) - 3} more" if len(entries) > 3 else ""
    raise UserError(
        f"--out {out}: the folder is not empty and holds no model repository ({shown}{more}); "
        "choose a new or empty folder, or an existing model repository"
    )


@dataclass(frozen=True)
class Tensor:
    direction: str  # "input" or "output"
    name: str
    data_type: str
    dims: tuple[int, ...]

    def text(self) -> str:
        return f"{self.direction} {self.name} {self.data_type} [{', '.join(str(d) for d in self.dims)}]"


def signature(config: Any) -> dict[tuple[str, str], Tensor]:
    """(direction, name) -> tensor for a ``ModelConfig``; dims with the batch axis when it batches."""
    from tritonclient.grpc import model_config_pb2  # light, but only build needs the proto here

    batch = (-1,) if config.max_batch_size > 0 else ()
    out: dict[tuple[str, str], Tensor] = {}
    for direction, tensors in (("input", config.input), ("output", config.output)):
        for t in tensors:
            dims = batch + tuple(int(d) for d in t.dims)
            out[(direction, t.name)] = Tensor(direction, t.name, model_config_pb2.DataType.Name(t.data_type), dims)
    return out


def api_changes(old: Any, new: Any) -> list[str]:
    """How ``new``'s inputs and outputs differ from ``old``'s, one phrase per changed tensor."""
    before, after = signature(old), signature(new)
    changes = []
    for key in sorted(set(before) | set(after)):
        was, now = before.get(key), after.get(key)
        if was == now:
            continue
        if was is None and now is not None:
            changes.append(f"new {now.text()}")
        elif now is None and was is not None:
            changes.append(f"{was.text()} removed")
        elif was is not None and now is not None:
            changes.append(f"{was.text()} -> {now.data_type} [{', '.join(str(d) for d in now.dims)}]")
    return changes


def _existing_config(out: Path, name: str) -> Any | None:
    path = out / name / CONFIG_FILE
    if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_CONFIG_BYTES:
        return None
    try:
        return parse_config(path.read_text(encoding="utf-8"), str(path))
    except (UserError, OSError, UnicodeError):
        return None  # not a config we can compare with: the offline checks report it


def check_api_unchanged(out: Path, rendered: Iterable[RenderedModel], replace: bool) -> None:
    """Refuse (exit 1) a build whose ensemble would change the inputs or outputs clients call, unless
    ``replace``. Models that do not exist yet in ``out`` change no API."""
    if replace:
        return
    for model in rendered:
        if model.role != "ensemble":
            continue
        old = _existing_config(out, model.name)
        if old is None:
            continue
        changes = api_changes(old, parse_config(model.config_text, model.name))
        if changes:
            raise RefusedError(_refusal(out, model.name, changes))


def _refusal(out: Path, name: str, changes: Sequence[str]) -> str:
    return (
        f"--out {out}: this build would change the API clients call on '{name}': {'; '.join(changes)}; "
        "nothing was changed. Pass --replace if the change is intended, or choose another --name"
    )
