"""Build one request's inputs from a model's config: shapes, data types, strings for TYPE_STRING.

Variable dimensions (-1) become ``VARIABLE_SIZE``; a model that batches gets a leading batch dimension.
Values are small and valid for the usual meanings: non-negative small integers (token ids, indices),
floats in [0, 1), short UTF-8 text for strings. Two shapes that almost always carry encoded images get
a tiny valid PNG instead, so a preprocessing step that decodes images can answer: a ``TYPE_UINT8``
input with dims ``[-1]``, and a ``TYPE_STRING`` input whose name mentions an image.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from repo_builder import dtypes

if TYPE_CHECKING:
    import numpy as np
    from tritonclient.grpc.model_config_pb2 import DataType, ModelConfig, ModelInput

VARIABLE_SIZE = 2
SAMPLE_TEXT = b"hello from repo-builder"
_IMAGE_WORDS = ("image", "img", "picture", "photo", "jpeg", "png")


@dataclass(frozen=True)
class SynthesizedInput:
    name: str
    array: np.ndarray
    wire: str  # KServe data type on the wire (FP32, BYTES, BF16...)


def tiny_png(size: int = 8) -> bytes:
    """A valid ``size`` x ``size`` RGB PNG, built without an imaging library."""
    rows = []
    for y in range(size):
        row = bytearray(b"\x00")
        for x in range(size):
            row += bytes(((x * 37) % 256, (y * 53) % 256, 128))
        rows.append(bytes(row))
    raw = b"".join(rows)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def request_shape(dims: Sequence[int], max_batch_size: int, batch_size: int = 1) -> list[int]:
    shape = [VARIABLE_SIZE if d < 0 else int(d) for d in dims]
    return [batch_size, *shape] if max_batch_size > 0 else shape


def _looks_like_image(name: str) -> bool:
    lower = name.lower()
    return any(w in lower for w in _IMAGE_WORDS)


def synthesize_input(
    tensor: ModelInput, max_batch_size: int, batch_size: int = 1, seed: int = 0
) -> SynthesizedInput:
    """One ``ModelInput`` (from ``model_config_pb2``) -> an array of the right dtype and shape."""
    import numpy as np

    type_name = _type_name(tensor.data_type)
    dtype = dtypes.from_triton(type_name)
    dims = list(tensor.dims)
    shape = request_shape(dims, max_batch_size, batch_size)
    count = int(np.prod(shape)) if shape else 1
    rng = np.random.default_rng(seed)
    if dtype.triton == "TYPE_STRING":
        value = tiny_png() if _looks_like_image(tensor.name) else SAMPLE_TEXT
        array = np.array([value] * count, dtype=object).reshape(shape)
        return SynthesizedInput(tensor.name, array, dtype.wire)
    if dtype.triton == "TYPE_UINT8" and dims == [-1]:
        data = np.frombuffer(tiny_png(), dtype=np.uint8)
        array = np.tile(data, (batch_size, 1)) if max_batch_size > 0 else data.copy()
        return SynthesizedInput(tensor.name, array, dtype.wire)
    if dtype.triton == "TYPE_BOOL":
        array = rng.integers(0, 2, size=shape).astype(bool)
    elif dtype.triton in ("TYPE_FP16", "TYPE_FP32", "TYPE_FP64", "TYPE_BF16"):
        numpy_name = (
            "float32" if dtype.triton == "TYPE_BF16" else dtype.numpy
        )  # tritonclient sends BF16 from float32
        array = rng.random(size=shape).astype(numpy_name)
    else:
        array = rng.integers(0, 4, size=shape).astype(dtype.numpy)
    return SynthesizedInput(tensor.name, array, dtype.wire)


def synthesize_inputs(config: ModelConfig, batch_size: int = 1, seed: int = 0) -> tuple[SynthesizedInput, ...]:
    """Inputs for one request to the model ``config`` (a ``ModelConfig``) describes."""
    return tuple(
        synthesize_input(t, config.max_batch_size, batch_size, seed + i) for i, t in enumerate(config.input)
    )


def _type_name(value: DataType.ValueType) -> str:
    from tritonclient.grpc import model_config_pb2

    return model_config_pb2.DataType.Name(value)


def sample_image(width: int = 320, height: int = 240) -> bytes:
    """A small JPEG drawn on the spot (no file needed): gradients and a few shapes."""
    import numpy as np  # heavy: only the demo client draws a sample image
    from PIL import Image, ImageDraw

    x = np.linspace(0, 255, width, dtype=np.float32)
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None]
    rgb = np.stack([np.broadcast_to(x, (height, width)), np.broadcast_to(y, (height, width)), (x + y) / 2 % 256], axis=-1)
    image = Image.fromarray(rgb.astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    draw.ellipse((width // 4, height // 4, width // 2, height // 2), fill=(250, 40, 30))
    draw.rectangle((width // 2, height // 2, width - 20, height - 20), fill=(20, 60, 220))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()
