"""The floor of any Python image step: read the JPEG bytes, answer with ready pixels (see ../README.md)."""

import numpy as np
import triton_python_backend_utils as pb_utils

PIXELS = np.zeros((8, 3, 224, 224), dtype=np.float32)  # max_batch_size rows, filled once


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            rows = len(pb_utils.get_input_tensor_by_name(request, "IMAGE").as_numpy())
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("pixel_values", PIXELS[:rows])]))
        return responses
