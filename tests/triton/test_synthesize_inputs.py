"""Request inputs synthesized from a model config: shapes, batch dimension, data types, strings."""

from __future__ import annotations

import io

import numpy as np
from google.protobuf import text_format
from PIL import Image
from tritonclient.grpc import model_config_pb2

from repo_builder.triton.synthesize import VARIABLE_SIZE, synthesize_inputs, tiny_png


def _config(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def test_synthesize_inputs_adds_batch_and_sizes_variable_dims_when_model_batches() -> None:
    config = _config(
        'max_batch_size: 8 input [{ name: "A" data_type: TYPE_FP16 dims: [-1, 3] },'
        '{ name: "B" data_type: TYPE_INT64 dims: [5] }]'
    )
    a, b = synthesize_inputs(config)
    assert (a.name, a.array.shape, a.array.dtype, a.wire) == ("A", (1, VARIABLE_SIZE, 3), np.float16, "FP16")
    assert (b.array.shape, b.array.dtype, b.wire) == ((1, 5), np.int64, "INT64")
    assert b.array.min() >= 0


def test_synthesize_inputs_gives_bytes_objects_when_type_string() -> None:
    (text,) = synthesize_inputs(_config('input [{ name: "TEXT" data_type: TYPE_STRING dims: [1] }]'))
    assert text.array.shape == (1,) and text.array.dtype == object and text.wire == "BYTES"
    assert isinstance(text.array[0], bytes) and text.array[0].decode()


def test_synthesize_inputs_gives_decodable_png_when_input_is_encoded_image() -> None:
    raw, named = synthesize_inputs(
        _config(
            'max_batch_size: 2 input [{ name: "RAW" data_type: TYPE_UINT8 dims: [-1] },'
            '{ name: "IMAGE_BYTES" data_type: TYPE_STRING dims: [1] }]'
        )
    )
    assert raw.array.dtype == np.uint8 and raw.array.shape[0] == 1
    assert Image.open(io.BytesIO(raw.array[0].tobytes())).size == (8, 8)
    assert named.array[0, 0] == tiny_png()


def test_synthesize_inputs_sends_bf16_from_float32_when_type_bf16() -> None:
    (x,) = synthesize_inputs(_config('input [{ name: "X" data_type: TYPE_BF16 dims: [2] }]'))
    assert x.array.dtype == np.float32 and x.wire == "BF16"
