"""`bench --input IMAGE_ASSET=FILE` drives a --nvcf-assets repository through assets (and cleans up)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.main import main


@pytest.mark.slow
@pytest.mark.triton
def test_bench_sends_assets_with_headers_when_input_is_asset(asset_repository: Any, tmp_path: Path) -> None:
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(asset_repository.images["c-500x375.jpg"])
    out = tmp_path / "bench.json"
    before = set(asset_repository.root.iterdir())
    code = main(["bench", str(asset_repository.repo), "--input", f"IMAGE_ASSET={photo}", "--concurrency", "1",
                 "--seconds", "1", "--warmup", "0", "--json", str(out)])
    assert code == 0
    [level] = json.loads(out.read_text())["models"][0]["levels"]
    assert level["errors"] == 0 and level["requests"] > 0
    assert set(asset_repository.root.iterdir()) == before  # the bench's asset folder is gone


def test_bench_exits_2_when_asset_root_cannot_be_written(asset_repository: Any, tmp_path: Path, capsys: Any) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(asset_repository.repo, repo)
    config = repo / "resnet50_preprocess" / "config.pbtxt"
    config.write_text(config.read_text().replace(str(asset_repository.root), "/proc/no-such-root"))
    photo = tmp_path / "photo.jpg"
    photo.write_bytes(b"not read")
    assert main(["bench", str(repo), "--input", f"IMAGE_ASSET={photo}", "--concurrency", "1", "--seconds", "1"]) == 2
    err = capsys.readouterr().err
    assert "/proc/no-such-root" in err and "--asset-root" in err
