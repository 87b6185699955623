"""The floor of any Python JPEG-decoding step: the image floor plus the entropy decoding (see ../README.md).

Each JPEG is decoded at 1/8 scale (libjpeg's DCT scaling): every decoder must still read all of the
entropy-coded (Huffman) data, while the IDCT, colour conversion and any resize almost vanish. A batch's
images are decoded on every core, as the generated step does."""

import io
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils
from PIL import Image

PIXELS = np.zeros((8, 3, 224, 224), dtype=np.float32)  # max_batch_size rows, filled once


def decode(data):
    image = Image.open(io.BytesIO(data))
    image.draft("RGB", (max(1, image.size[0] // 8), max(1, image.size[1] // 8)))
    image.load()
    return image.size


class TritonPythonModel:
    def initialize(self, args):
        self.pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)

    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, "IMAGE").as_numpy().reshape(-1) for r in requests]
        items = [bytes(item) for data in inputs for item in data]
        if len(items) > 1:  # one image runs on this thread, as in the generated step
            list(self.pool.map(decode, items))
        elif items:
            decode(items[0])
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("pixel_values", PIXELS[:len(data)])]) for data in inputs]

    def finalize(self):
        self.pool.shutdown(wait=False)
