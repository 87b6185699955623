"""The floor of any Python-backend step: hand the input back (see ../README.md)."""

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("ECHO", pb_utils.get_input_tensor_by_name(r, "TEXT").as_numpy())])
            for r in requests
        ]
