"""Shared by the NVCF tests: a resnet50 repository built with --nvcf-assets, images, and requests that
carry the headers NVCF sends (through tritonclient's HTTP client, as an NVCF-hosted Triton receives them)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from repo_builder.cli.main import main

MAX_ASSETS = 4
MAX_ASSET_BYTES = 200_000
TOP_K = 5
IMAGES = {"a-320x240.jpg": (320, 240, "JPEG", 1), "b-240x320.png": (240, 320, "PNG", 2),
          "c-500x375.jpg": (500, 375, "JPEG", 3), "d-256x256.png": (256, 256, "PNG", 4)}


def build_asset_repository(repo: Path, root: Path, *extra: str) -> None:
    """``build resnet50 --nvcf-assets --asset-root ROOT`` (random seeded weights, the Python runtime)."""
    code = main([
        "build", "resnet50", "--weights", "random", "--runtime", "python", "--out", str(repo), "--skip-parity", "-q",
        "--top-k", str(TOP_K), "--nvcf-assets", "--asset-root", str(root), "--max-assets", str(MAX_ASSETS),
        "--max-asset-bytes", str(MAX_ASSET_BYTES), *extra,
    ])
    assert code == 0


def make_image(width: int, height: int, fmt: str, seed: int) -> bytes:
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
    image = Image.fromarray(coarse, "RGB").resize((width, height), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(3):
        x, y = int(rng.integers(0, width - 40)), int(rng.integers(0, height - 40))
        draw.rectangle((x, y, x + 40, y + 30), fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buffer.getvalue()


def bytes_input(name: str, values: list[bytes]) -> Any:
    import tritonclient.http as httpclient

    tensor = httpclient.InferInput(name, [len(values), 1], "BYTES")
    tensor.set_data_from_numpy(np.array(values, dtype=object).reshape(-1, 1))
    return tensor


def nvcf_headers(folder: Path | str, ids: list[str]) -> dict[str, str]:
    return {"NVCF-ASSET-DIR": str(folder), "NVCF-FUNCTION-ASSET-IDS": ",".join(ids)}


def answer(client: Any, inputs: list[Any], headers: dict[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    result = client.infer("resnet50", inputs, headers=headers)
    return result.as_numpy("LABELS"), result.as_numpy("SCORES")


def refusal(client: Any, inputs: list[Any], headers: dict[str, str] | None = None) -> str:
    """The error text of a request that must be refused."""
    from tritonclient.utils import InferenceServerException

    try:
        client.infer("resnet50", inputs, headers=headers)
    except InferenceServerException as exc:
        return str(exc)
    raise AssertionError("the request was answered, not refused")
