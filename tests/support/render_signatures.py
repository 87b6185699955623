"""Hand-written signatures shaped like export's output, so render tests need no torch and no export."""

from __future__ import annotations

from pathlib import Path

from repo_builder.pipelines.settings import ModelSource
from repo_builder.spec import Signature, TensorSpec

IMAGE_PREPROCESS = {
    "resize": 232,
    "crop": 224,
    "mean": [0.485, 0.456, 0.406],
    "std": [0.229, 0.224, 0.225],
    "interpolation": "bilinear",
    "layout": "NCHW",
}


def image_signature(num_classes: int = 1000, dtype: str = "float32") -> Signature:
    return Signature(
        inputs=(TensorSpec("pixel_values", dtype, ("batch", 3, 224, 224)),),
        outputs=(TensorSpec("logits", dtype, ("batch", num_classes)),),
        metadata={"task": "image-classification", "labels_file": "labels.txt", "preprocess": dict(IMAGE_PREPROCESS)},
    )


def text_signature(num_labels: int = 3, int_dtype: str = "int64", token_type_ids: bool = True) -> Signature:
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_type_ids else [])
    return Signature(
        inputs=tuple(TensorSpec(n, int_dtype, ("batch", "sequence")) for n in names),
        outputs=(TensorSpec("logits", "float32", ("batch", num_labels)),),
        metadata={
            "task": "text-classification",
            "labels_file": "labels.txt",
            "preprocess": {"tokenizer_dir": "tokenizer", "max_length": 128, "input_names": names, "pad_to_multiple_of": 8},
        },
    )


def source_for(signature: Signature, runtime: str) -> ModelSource:
    if runtime == "tensorrt":
        return ModelSource(signature, {"model.plan": b"plan"}, default_model_filename="model.plan")
    return ModelSource(signature, {"model.onnx": Path("model.onnx")})


def versions_for(name: str, version: int = 1) -> dict[str, int]:
    return {f"{name}_preprocess": version, f"{name}_model": version, f"{name}_postprocess": version, name: version}
