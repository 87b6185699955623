"""``repo-builder.json`` at the repository root: every built file's sha256 and the build settings.

Triton treats only subfolders as models, so a file at the root is invisible to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from repo_builder import __version__
from repo_builder.compat import UTC
from repo_builder.fsutil import sha256_file, write_json_atomic
from repo_builder.guarded_read import MANIFEST, UnsafeFile, loads_json, read_repository_file
from repo_builder.triton_layout import CONFIG_FILE

MANIFEST_FILE = "repo-builder.json"
MANIFEST_FORMAT = 1


def read_manifest(out: Path) -> dict[str, Any]:
    """The current manifest, or an empty one when it is missing or unreadable (it is rewritten whole)."""
    try:
        data = loads_json(read_repository_file(out / MANIFEST_FILE, out, MANIFEST), MANIFEST_FILE)
    except (UnsafeFile, ValueError):
        return {"format": MANIFEST_FORMAT, "models": {}}
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        return {"format": MANIFEST_FORMAT, "models": {}}
    return data


def record_target(out: Path, target: Mapping[str, Any]) -> Path:
    """Only the manifest's ``target`` rewritten (before a build's models move in; ``update_manifest`` after)."""
    data = read_manifest(out)
    data["target"] = dict(target)
    data["format"] = MANIFEST_FORMAT
    path = out / MANIFEST_FILE
    write_json_atomic(path, data, sort_keys=True)
    return path


def update_manifest(out: Path, models: Sequence[Any], settings: Mapping[str, Any], *, target: Mapping[str, Any] | None = None) -> Path:
    """Record the models just written (``StagedModel``s); other models' entries are kept. ``target``: the
    deploy target the build was for (``step_packages.target_record``), which validate judges by default."""
    data = read_manifest(out)
    if target is not None:
        data["target"] = dict(target)
    built_at = datetime.now(UTC).isoformat(timespec="seconds")
    for m in models:
        entry = data["models"].setdefault(m.name, {})
        entry["role"] = m.role
        # As written (pinned to its version), not as rendered: what a later check compares with.
        config = out / m.name / CONFIG_FILE
        entry["config_sha256"] = sha256_file(config) if config.is_file() else m.config_sha256
        versions = entry.setdefault("versions", {})
        versions[str(m.version)] = {
            "built_at": built_at,
            "tool": f"repo-builder {__version__}",
            "settings": dict(settings),
            "files": dict(sorted(m.files.items())),
        }
    # Drop versions that no longer exist on disk, so the manifest describes what is there.
    for name, entry in data["models"].items():
        versions = entry.get("versions", {})
        for number in list(versions):
            if not (out / name / number).is_dir():
                del versions[number]
    data["format"] = MANIFEST_FORMAT
    path = out / MANIFEST_FILE
    write_json_atomic(path, data, sort_keys=True)
    return path


def failed_plan_gates(manifest: Mapping[str, Any]) -> list[str]:
    """``model/version`` of every model step whose served gate failed (publish refuses those)."""
    failed = []
    for name, entry in (manifest.get("models") or {}).items():
        for version, built in ((entry or {}).get("versions") or {}).items():
            gate = ((built or {}).get("settings") or {}).get("precision")
            if isinstance(gate, dict) and isinstance(gate.get("served_gate"), dict) and gate["served_gate"].get("passed") is False:
                failed.append(f"{name}/{version}")
    return failed
