"""The floor of a Python JPEG step decoding at the scale the generated step does, then ready pixels
(see ../README.md).

Each JPEG is decoded as the generated step decodes it: JPEG draft mode keeps at least DRAFT_MARGIN times the
resize target's pixels (full scale for a 500x375 source, 1/2 for 1920x1080, 1/4 for 4032x3024); at
1920x1080 the next smaller scale breaks the accuracy limits (the benchmark measures it per size). Then no resize, crop or normalizing:
the answer is ready pixels. A batch's images are decoded on every core, as the generated step does."""

import io
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils
from PIL import Image

PIXELS = np.zeros((8, 3, 224, 224), dtype=np.float32)  # max_batch_size rows, filled once
RESIZE = 232  # ResNet50's weights transforms: the shorter side to 232, then a 224 crop
DRAFT_MARGIN = 2  # the generated step's default


def decode(data):
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
