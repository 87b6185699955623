"""Version numbers for a build, and the version pin that makes switching a model one atomic write.

Triton shares one ``config.pbtxt`` between all versions of a model and, by default, serves the greatest
version folder. Written that way, a new version folder and its new config are two moves, and a polling
server can load one without the other. So every config the writer leaves names the one version it serves
(``version_policy { specific { versions: [N] } }``): a new version folder is invisible until the config
that pins it replaces the old one, a single ``os.replace``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from google.protobuf import text_format

from repo_builder.errors import UserError
from repo_builder.triton_config import read_config_file, versions_to_load
from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.validate.scan import parse_version_name

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig

PIN_COMMENT = "# repo-builder serves exactly this version: a new version folder is switched in by rewriting this config"


def existing_versions(model_dir: Path) -> tuple[int, ...]:
    """Version folders Triton would load (ignored names such as '01' or 'tmp' do not count)."""
    if not model_dir.is_dir():
        return ()
    found = []
    for child in model_dir.iterdir():
        if child.is_dir():
            number, _ = parse_version_name(child.name)
            if number is not None and number >= 0:
                found.append(number)
    return tuple(sorted(found))


def next_version(model_dir: Path) -> int:
    versions = existing_versions(model_dir)
    return versions[-1] + 1 if versions else 1


def choose_versions(out: Path, names: Sequence[str], requested: int | None, force: bool) -> dict[str, int]:
    """Model name -> version to write. Never an existing version unless ``force``."""
    if requested is None:
        return {name: next_version(out / name) for name in names}
    if requested < 1:
        raise UserError(f"--version must be >= 1, got {requested}")
    taken = [name for name in names if (out / name / str(requested)).exists()]
    if taken and not force:
        where = ", ".join(f"{out / name / str(requested)}" for name in taken)
        raise UserError(f"version {requested} already exists ({where}); pass --force to replace it, or omit --version for the next free one")
    return {name: requested for name in names}


def read_config(model_dir: Path) -> tuple[str | None, ModelConfig | None]:
    """A model's config text and parsed proto; (None, None) when missing, (text, None) when it does not parse."""
    read = read_config_file(model_dir / CONFIG_FILE, model_dir.parent)
    return read.text, read.config


# The versions Triton serves under a config's version policy: the one VersionsToLoad, under the writer's name.
served_versions = versions_to_load


def is_pinned(config: ModelConfig | None) -> bool:
    return config is not None and config.version_policy.WhichOneof("policy_choice") == "specific"


def pin_config(text: str, config: ModelConfig | None, versions: Sequence[int]) -> str:
    """``text`` serving exactly ``versions``; the text is kept as written when it has no policy yet."""
    pin = f"version_policy: {{ specific: {{ versions: [{', '.join(str(v) for v in versions)}] }} }}\n"
    if config is not None and config.HasField("version_policy"):
        config.ClearField("version_policy")
        text = text_format.MessageToString(config)
    body = "\n".join(line for line in text.splitlines() if line != PIN_COMMENT)
    return f"{body.rstrip()}\n{PIN_COMMENT}\n{pin}"


def same_but_policy(old: ModelConfig | None, new: ModelConfig | None) -> bool:
    """True when two configs differ in nothing but their version policy (None: unknown, so not the same)."""
    if old is None or new is None:
        return False
    a, b = type(old)(), type(new)()
    a.CopyFrom(old)
    b.CopyFrom(new)
    a.ClearField("version_policy")
    b.ClearField("version_policy")
    return a == b
