"""Repositories built once for the whole folder (the build is the slow part): one resnet50 built with --nvcf-assets,
and the Python steps' repository that test_hostile_requests.py and test_request_budget.py share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from support.nvcf_helpers import IMAGES, build_asset_repository, make_image
from support.step_repository import build_step_repository


@dataclass(frozen=True)
class AssetRepository:
    repo: Path  # the built repository (never changed by the tests)
    root: Path  # --asset-root it was built with
    folder: Path  # root/request-1: one request's asset folder, holding IMAGES
    images: dict[str, bytes]


@pytest.fixture(scope="session")
def asset_repository(tmp_path_factory: pytest.TempPathFactory) -> AssetRepository:
    base = tmp_path_factory.mktemp("nvcf")
    root = base / "inputAssets"
    folder = root / "request-1"
    folder.mkdir(parents=True)
    images = {name: make_image(*spec) for name, spec in IMAGES.items()}
    for name, data in images.items():
        (folder / name).write_bytes(data)
    build_asset_repository(base / "repo", root)
    return AssetRepository(base / "repo", root, folder, images)


@pytest.fixture(scope="session")
def step_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """support.step_repository.STEP_MODELS, built once; never changed (copy it with linked_copy to edit it)."""
    return build_step_repository(tmp_path_factory)
