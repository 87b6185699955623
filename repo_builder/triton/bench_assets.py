"""``bench --input IMAGE_ASSET=FILE``: drive a repository built with ``--nvcf-assets`` through assets.

As NVCF would: each FILE is written into a fresh folder under the asset root the repository was built
with (its preprocessing step's config says which), the requests carry asset ids and the two NVCF headers,
and the server forwards them (``--grpc-header-forward-pattern``: bench talks gRPC). The folder is removed
afterwards. FILEs given for ``IMAGE`` are sent in the request as usual, so the two paths compare directly.
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from repo_builder.errors import UserError
from repo_builder.nvcf import ASSET_DIR_HEADER, ASSET_IDS_HEADER, FORWARD_PATTERN, PARAM_INPUT, PARAM_ROOT
from repo_builder.triton.bench import config_on_disk

SERVER_ARGS = (f"--grpc-header-forward-pattern={FORWARD_PATTERN}", f"--http-header-forward-pattern={FORWARD_PATTERN}")


@dataclass(frozen=True)
class ModelRequests:
    """What bench sends to one model: files by input (asset inputs hold ids), and the headers."""

    files: Mapping[str, Sequence[bytes]]
    headers: Mapping[str, str] = field(default_factory=dict)


def asset_step(repository: Path, name: str) -> tuple[str, str] | None:
    """(asset input, asset root) when model ``name`` (or its first step) reads NVCF assets."""
    config = config_on_disk(repository, name)
    if config is not None and config.platform == "ensemble" and config.ensemble_scheduling.step:
        config = config_on_disk(repository, config.ensemble_scheduling.step[0].model_name)
    if config is None or PARAM_ROOT not in config.parameters or PARAM_INPUT not in config.parameters:
        return None
    return config.parameters[PARAM_INPUT].string_value, config.parameters[PARAM_ROOT].string_value


def _write_assets(root: str, contents: Sequence[bytes], option: str) -> tuple[Path, list[bytes]]:
    folder = Path(root) / f"repo-builder-bench-{uuid.uuid4().hex[:12]}"
    try:
        folder.mkdir()
    except OSError as exc:
        raise UserError(
            f"--input {option}: the repository reads assets under {root}, where bench cannot write ({exc.strerror or exc}); "
            "build a copy with --asset-root DIR (a folder you can write) to bench it"
        ) from None
    ids = []
    for index, data in enumerate(contents):
        asset_id = f"asset-{index}"
        (folder / asset_id).write_bytes(data)
        ids.append(asset_id.encode())
    return folder, ids


@contextlib.contextmanager
def asset_requests(repository: Path, names: Sequence[str], files: Mapping[str, Sequence[bytes]]) -> Iterator[dict[str, ModelRequests]]:
    """Per model: the files to send, with asset files written under the root and replaced by their ids."""
    folders: list[Path] = []
    plans: dict[str, ModelRequests] = {}
    try:
        for name in names:
            step = asset_step(repository, name)
            if step is None or step[0] not in files:
                plans[name] = ModelRequests(files)
                continue
            asset_input, root = step
            folder, ids = _write_assets(root, files[asset_input], f"{asset_input}=FILE")
            folders.append(folder)
            # gRPC metadata keys are lower case (the step reads header names without regard to case).
            headers = {ASSET_DIR_HEADER.lower(): str(folder), ASSET_IDS_HEADER.lower(): ",".join(i.decode() for i in ids)}
            plans[name] = ModelRequests({**files, asset_input: ids}, headers)
        yield plans
    finally:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)


def needs_forwarding(plans: Mapping[str, ModelRequests]) -> bool:
    return any(plan.headers for plan in plans.values())
