"""The floors of Python JPEG-decoding steps: the image floor plus decoding, then ready pixels (see ../README.md).

The config's `decode_at` parameter picks how much decoding:
- `eighth` (python_image_decode_floor): each JPEG at 1/8 scale (libjpeg's DCT scaling). Every decoder must still
  read all of the entropy-coded (Huffman) data, while the IDCT, colour conversion and any resize almost vanish.
- `draft` (python_image_draft_floor): each JPEG at the scale the generated step decodes it: JPEG draft keeps at
  least DRAFT_MARGIN times the resize target's pixels (full scale for a 500x375 source, 1/2 for 1920x1080, 1/4
  for 4032x3024). No resize, crop or normalizing follows: what ours serves below it is that work.
A batch's images are decoded on every core (one image on the calling thread), as the generated step does."""

import io
import json
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils
from PIL import Image

PIXELS = np.zeros((8, 3, 224, 224), dtype=np.float32)  # max_batch_size rows, filled once
RESIZE = 232  # ResNet50's weights transforms: the shorter side to 232, then a 224 crop
DRAFT_MARGIN = 2  # the generated step's default


def decode_eighth(data):
    image = Image.open(io.BytesIO(data))
    image.draft("RGB", (max(1, image.size[0] // 8), max(1, image.size[1] // 8)))
    image.load()
    return image.size


def decode_draft(data):
    image = Image.open(io.BytesIO(data))
    width, height = image.size
    target = (RESIZE, int(RESIZE * height / width)) if width <= height else (int(RESIZE * width / height), RESIZE)
    if image.format == "JPEG":
        image.draft("RGB", (target[0] * DRAFT_MARGIN, target[1] * DRAFT_MARGIN))
    if image.mode != "RGB":
        image = image.convert("RGB")
    image.load()
    return image.size


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})
        decode_at = parameters.get("decode_at", {}).get("string_value", "eighth")
        self.decode = {"eighth": decode_eighth, "draft": decode_draft}[decode_at]
        self.pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)

    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, "IMAGE").as_numpy().reshape(-1) for r in requests]
        items = [bytes(item) for data in inputs for item in data]
        if len(items) > 1:
            list(self.pool.map(self.decode, items))
        elif items:
            self.decode(items[0])
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("pixel_values", PIXELS[:len(data)])]) for data in inputs]

    def finalize(self):
        self.pool.shutdown(wait=False)
