"""One resnet50 repository built with --nvcf-assets for the whole folder (the build is the slow part)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from support.nvcf_helpers import IMAGES, build_asset_repository, make_image


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
