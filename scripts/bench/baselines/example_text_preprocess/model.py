"""Baseline: the tokenizer write-up's approach, a transformers tokenizer per request padded to 512 (../README.md)."""

import os

import numpy as np
import triton_python_backend_utils as pb_utils
from transformers import AutoTokenizer


class TritonPythonModel:
    def initialize(self, args):
        folder = os.path.join(args["model_repository"], args["model_version"], "tokenizer")
        self.tokenizer = AutoTokenizer.from_pretrained(folder)

    def execute(self, requests):
        responses = []
        for request in requests:
            query = [t.decode("UTF-8") for t in pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy().reshape(-1)]
            tokens = self.tokenizer(query, padding="max_length", max_length=512, truncation=True, return_tensors="np")
            outputs = [pb_utils.Tensor(name, tokens[name].astype(np.int64)) for name in ("input_ids", "attention_mask", "token_type_ids")]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses

    def finalize(self):
        pass
