"""Photo-like JPEGs made here (no downloads): smooth light, objects with edges, fine texture and sensor noise.

Flat synthetic images would flatter JPEG draft decoding and resizing; these carry detail at every scale,
as camera photos do, so accuracy and speed figures measured on them transfer.
"""

from __future__ import annotations

import io

import numpy as np

SIZES = {"500x375": (500, 375), "1920x1080": (1920, 1080), "4032x3024": (4032, 3024)}


def photo(width: int, height: int, seed: int, quality: int = 90) -> bytes:
    from PIL import Image, ImageDraw, ImageFilter  # Pillow: the serve extra's, imported where used

    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    image = Image.fromarray(coarse, "RGB").resize((width, height), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(12):  # objects: hard edges at all sizes
        x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
        w, h = int(rng.integers(width // 40 + 2, width // 3)), int(rng.integers(height // 40 + 2, height // 3))
        fill = tuple(int(c) for c in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x, y, x + w, y + h), fill=fill)
    # Texture at a few pixels' scale (foliage, fabric), then per-pixel sensor noise.
    texture = rng.normal(0, 18, size=(height // 3 + 1, width // 3 + 1, 3)).astype(np.float32)
    texture_image = Image.fromarray(np.clip(texture + 128, 0, 255).astype(np.uint8), "RGB")
    texture_image = texture_image.resize((width, height), Image.Resampling.BILINEAR).filter(ImageFilter.GaussianBlur(0.6))
    pixels = np.asarray(image, dtype=np.float32) + np.asarray(texture_image, dtype=np.float32) - 128
    pixels += rng.normal(0, 4, size=pixels.shape).astype(np.float32)
    out = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
    buffer = io.BytesIO()
    out.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def photos(size: str, count: int, seed: int = 0) -> list[bytes]:
    width, height = SIZES[size]
    return [photo(width, height, seed * 1000 + i) for i in range(count)]
