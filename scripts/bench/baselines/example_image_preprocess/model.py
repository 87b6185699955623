"""Baseline in the style of python_backend's examples/preprocessing/model.py (see ../README.md)."""

import io

import numpy as np
import torchvision.transforms as transforms
import triton_python_backend_utils as pb_utils
from PIL import Image


class TritonPythonModel:
    def initialize(self, args):
        pass

    def execute(self, requests):
        responses = []
        for request in requests:
            in_0 = pb_utils.get_input_tensor_by_name(request, "IMAGE")
            normalize = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
            loader = transforms.Compose([transforms.Resize(232), transforms.CenterCrop(224), transforms.ToTensor(), normalize])
            images = []
            for item in in_0.as_numpy().reshape(-1):
                image = Image.open(io.BytesIO(bytes(item))).convert("RGB")
                images.append(np.array(loader(image).unsqueeze(0)))
            out_tensor_0 = pb_utils.Tensor("pixel_values", np.concatenate(images).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out_tensor_0]))
        return responses

    def finalize(self):
        pass
