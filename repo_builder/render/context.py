"""Pure functions from a Signature and pipeline settings to template contexts (plain dicts).

Nothing here reads files or imports heavy packages, so every context is easy to test and to diff.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from repo_builder import dtypes
from repo_builder.errors import UserError
from repo_builder.spec import Signature, TensorSpec

# One Python instance per step: these machines share few cores and the steps are numpy-bound.
DEFAULT_INSTANCE_COUNT = 1
# Pillow's own decompression-bomb warning limit (PIL.Image.MAX_IMAGE_PIXELS): an image step refuses an image whose
# header declares more pixels, before anything is decoded (build --max-image-pixels; docs/security.md).
DEFAULT_MAX_IMAGE_PIXELS = 1024 * 1024 * 1024 // 4 // 3
# A text step reads at most max_length * this many bytes of a text before it knows the tokens truncation keeps
# (templates/model/_text_bounds.py.j2): generous, English takes about 5 bytes per token and CJK 3.
TEXT_BYTES_PER_TOKEN = 64
# Every client-facing Python step refuses a request whose inputs hold more bytes (build --max-request-bytes), and admits
# requests into one execution only while their worst-case memory fits a per-instance budget (build --step-memory-mib;
# templates/model/_request_budget.py.j2, docs/security.md).
DEFAULT_MAX_REQUEST_BYTES = 64 * 2**20
DEFAULT_STEP_MEMORY_MIB = 2048
# Worst-case bytes per declared pixel while an image is decoded and converted, per decoder: Pillow's 16-bit grey path
# (2-byte frame, shifted copy, 8-bit grey, RGB), OpenCV's 16-bit PNG (6-byte frame, then 8-bit BGR).
DECODE_BYTES_PER_PIXEL = {"pillow": 11, "opencv": 9}
# Worst-case bytes per byte a text step tokenizes (Encodings with offsets and words; ~190 measured on a 10 MB text).
TOKENIZE_BYTES_PER_BYTE = 256


def preferred_batch_sizes(max_batch_size: int) -> tuple[int, ...]:
    """Powers of two from 2 up to, and always including, max_batch_size (so every size fits it)."""
    if max_batch_size < 1:
        # A caller's bug: the user's --max-batch-size is checked once, by pipelines.settings.PipelineSettings.
        raise ValueError(f"max_batch_size must be >= 1 here, got {max_batch_size}")
    sizes = []
    size = 2
    while size < max_batch_size:
        sizes.append(size)
        size *= 2
    sizes.append(max_batch_size)
    return tuple(sizes)


def batching_context(max_batch_size: int, max_queue_delay_us: int) -> dict[str, Any]:
    if max_queue_delay_us < 0:
        raise UserError(f"max queue delay must be >= 0 microseconds, got {max_queue_delay_us}")
    return {"preferred_batch_sizes": list(preferred_batch_sizes(max_batch_size)), "max_queue_delay_us": max_queue_delay_us}


# Tensor names reach configs and generated model.py files: a full match (re.fullmatch, so "x\n" fails) of
# the characters exporters write (ONNX "input.1", TF-style "x:0", "/block/out", "[0]"); never quotes,
# whitespace or backslashes. Generated code quotes them with repr() as well (the `py` filter).
TENSOR_NAME = re.compile(r"[A-Za-z0-9_.:/\-\[\]]{1,256}")


def check_tensor_name(name: str) -> str:
    if not isinstance(name, str) or not TENSOR_NAME.fullmatch(name):
        raise UserError(
            f"tensor name {name!r} (signature.json): use at most 256 letters, digits and _ . : / - [ ]; "
            "rename the model's inputs/outputs when exporting"
        )
    return name


def tensor_context(name: str, dtype: str, dims: Sequence[int]) -> dict[str, Any]:
    """One config tensor: ``dtype`` is a numpy name, ``dims`` exclude the batch axis."""
    check_tensor_name(name)
    return {"name": name, "data_type": dtypes.from_numpy(dtype).triton, "dims": [int(d) for d in dims]}


def signature_tensor(spec: TensorSpec, batch_axis: int | None) -> dict[str, Any]:
    return tensor_context(spec.name, spec.dtype, spec.triton_dims(batch_axis))


def require_batch_axis(signature: Signature, origin: str) -> None:
    if signature.batch_axis != 0:
        raise UserError(f"{origin}: the model's batch axis is {signature.batch_axis!r}; a batching pipeline needs it first (0)")


def _model_context(
    name: str, comment: str, max_batch_size: int, inputs: Sequence[Mapping[str, Any]], outputs: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The keys every config template takes, ensembles included."""
    return {
        "name": name,
        "comment": comment,
        "max_batch_size": max_batch_size,
        "inputs": [dict(t) for t in inputs],
        "outputs": [dict(t) for t in outputs],
    }


def config_context(
    name: str,
    *,
    inputs: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
    max_batch_size: int,
    max_queue_delay_us: int,
    kind: str,
    comment: str,
    instance_count: int = DEFAULT_INSTANCE_COUNT,
    parameters: Mapping[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The context every non-ensemble config template takes (plus per-platform ``extra`` keys).

    ``parameters``: the config's string ``parameters`` map (e.g. the model step's thread layout)."""
    if kind not in ("KIND_CPU", "KIND_GPU"):
        raise ValueError(f"unknown instance kind {kind}")
    if instance_count < 1:
        raise UserError(f"instance count must be >= 1, got {instance_count}")
    return {
        **_model_context(name, comment, max_batch_size, inputs, outputs),
        "batching": batching_context(max_batch_size, max_queue_delay_us),
        "instance_group": {"count": instance_count, "kind": kind},
        "parameters": {str(k): str(v) for k, v in (parameters or {}).items()},
        **extra,
    }


def ensemble_context(
    name: str,
    *,
    inputs: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
    member_max_batch_sizes: Sequence[int],
    steps: Sequence[Mapping[str, Any]],
    comment: str,
    max_batch_size: int | None = None,
) -> dict[str, Any]:
    """An ensemble never allows a bigger batch than its smallest member (Triton refuses it otherwise)."""
    limit = min(member_max_batch_sizes)
    size = limit if max_batch_size is None else min(max_batch_size, limit)
    return {
        **_model_context(name, comment, size, inputs, outputs),
        "steps": [
            {"model_name": s["model_name"], "input_map": dict(s["input_map"]), "output_map": dict(s["output_map"])}
            for s in steps
        ],
    }


def classification_outputs(top_k: int, num_classes: int) -> tuple[int, list[dict[str, Any]]]:
    """The top-k outputs every classification pipeline returns: (k, tensors)."""
    if top_k < 1:
        raise UserError(f"--top-k must be >= 1, got {top_k}")
    k = min(top_k, num_classes)
    return k, [
        tensor_context("LABELS", "object", [k]),
        tensor_context("SCORES", "float32", [k]),
        tensor_context("CLASS_IDS", "int64", [k]),
    ]


def single_logits_output(signature: Signature, origin: str) -> TensorSpec:
    """The classifier's logits: its only output, shaped (batch, classes)."""
    if len(signature.outputs) != 1:
        names = ", ".join(t.name for t in signature.outputs)
        raise UserError(f"{origin}: a classifier needs exactly one output (logits), found {names}")
    logits = signature.outputs[0]
    dims = logits.triton_dims(signature.batch_axis)
    if len(dims) != 1 or dims[0] < 1:
        raise UserError(f"{origin}: output '{logits.name}' must be (batch, classes) with a fixed class count, got {list(logits.shape)}")
    if logits.dtype not in ("float16", "float32", "float64"):
        raise UserError(f"{origin}: output '{logits.name}' must be floating point, got {logits.dtype}")
    return logits


def postprocess_context(name: str, model_name: str, logits: TensorSpec, top_k: int, num_classes: int) -> dict[str, Any]:
    return {
        "name": name,
        "model_name": model_name,
        "input_name": "LOGITS",
        "top_k": min(top_k, num_classes),
        "num_classes": num_classes,
        "labels_file": "labels.txt",
        "logits_dtype": logits.dtype,
    }


# torch's antialiased uint8 resizes that reproduce Pillow's (torchvision's tensor transforms rely on it).
TORCH_RESIZES = ("bilinear", "bicubic")


def image_preprocess_context(
    name: str, model_name: str, model_input: TensorSpec, preprocess: Mapping[str, Any], *, draft_margin: int, origin: str,
    resize_with: str = "pillow", max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
) -> dict[str, Any]:
    """From signature metadata ``preprocess``: resize (shorter side), crop, mean, std, interpolation, layout;
    ``max_image_pixels``: the most pixels an image's header may declare."""
    try:
        resize = int(preprocess["resize"])
        crop = preprocess["crop"]
        crop_hw = [int(crop), int(crop)] if isinstance(crop, int) else [int(c) for c in crop]
        mean = [float(m) for m in preprocess["mean"]]
        std = [float(s) for s in preprocess["std"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"{origin}: metadata.preprocess needs resize, crop, mean and std ({exc!r}); re-run 'repo-builder export'") from None
    interpolation = str(preprocess.get("interpolation", "bilinear")).lower()
    if interpolation not in ("nearest", "bilinear", "bicubic", "lanczos", "box", "hamming"):
        raise UserError(f"{origin}: unsupported interpolation '{interpolation}'")
    layout = str(preprocess.get("layout", "NCHW")).upper()
    if layout not in ("NCHW", "NHWC"):
        raise UserError(f"{origin}: unsupported layout '{layout}', expected NCHW or NHWC")
    if len(crop_hw) != 2 or len(mean) != 3 or len(std) != 3 or any(s == 0 for s in std):
        raise UserError(f"{origin}: preprocess crop must be [h, w] and mean/std three non-zero values")
    if resize < max(crop_hw):
        raise UserError(f"{origin}: resize {resize} is smaller than the crop {crop_hw}")
    if resize_with == "torch" and interpolation not in TORCH_RESIZES:
        raise UserError(f"{origin}: --resize-with torch matches Pillow's {' and '.join(TORCH_RESIZES)} resizes only, this model's is "
                        f"{interpolation}: use --resize-with pillow")
    return {
        "name": name,
        "model_name": model_name,
        "input_name": "IMAGE",
        "output_name": model_input.name,
        "output_dtype": model_input.dtype,
        "resize": resize,
        "crop": crop_hw,
        "mean": mean,
        "std": std,
        "interpolation": interpolation,
        "layout": layout,
        "draft_margin": draft_margin,
        "resize_with": resize_with,
        "max_image_pixels": max_image_pixels,
        "pixel_bytes": DECODE_BYTES_PER_PIXEL["pillow"],
    }


# Which field of a `tokenizers` Encoding feeds which model input.
ENCODING_FIELDS = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}


def text_preprocess_context(
    name: str, model_name: str, inputs: Sequence[TensorSpec], preprocess: Mapping[str, Any], origin: str
) -> dict[str, Any]:
    outputs_map: dict[str, list[str]] = {}
    for spec in inputs:
        if spec.name not in ENCODING_FIELDS:
            known = ", ".join(ENCODING_FIELDS)
            raise UserError(f"{origin}: model input '{spec.name}' is not a tokenizer output (known: {known})")
        if spec.dtype not in ("int32", "int64"):
            raise UserError(f"{origin}: model input '{spec.name}' must be int32 or int64, got {spec.dtype}")
        outputs_map[spec.name] = [ENCODING_FIELDS[spec.name], spec.dtype]
    try:
        max_length = int(preprocess["max_length"])
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{origin}: metadata.preprocess.max_length is missing; re-run 'repo-builder export'") from None
    if max_length < 1:
        raise UserError(f"{origin}: metadata.preprocess.max_length must be >= 1, got {max_length}")
    return {
        "name": name,
        "model_name": model_name,
        "input_name": "TEXT",
        "outputs": [{"name": s.name, "dtype": s.dtype} for s in inputs],
        "outputs_map": outputs_map,
        "max_length": max_length,
        "pad_to_multiple_of": int(preprocess.get("pad_to_multiple_of", 8)),
        "tokenizer_dir": "tokenizer",
        "bytes_per_token": TEXT_BYTES_PER_TOKEN,
    }


def request_budget_context(max_request_bytes: int, step_memory_mib: int, max_batch_size: int, instances: int) -> dict[str, Any]:
    """What model/_request_budget.py.j2 and a step's README need: the request byte cap, the per-instance memory
    budget in bytes, and (README only) the batch size and the step's instance count."""
    return {"max_request_bytes": max_request_bytes, "step_memory_budget": step_memory_mib * 2**20,
            "max_batch_size": max_batch_size, "step_instances": instances, "tokenize_bytes": TOKENIZE_BYTES_PER_BYTE}


def limits_readme_context(
    name: str, *, max_image_pixels: int | None = None, decoder: str = "pillow", max_length: int | None = None,
    long_texts: str = "truncate", budget: Mapping[str, Any] | None = None, byte_copies: int = 3,
) -> dict[str, Any]:
    """The preprocessing step's README.md (model/preprocess_README.md.j2): an image step's limits when
    ``max_image_pixels`` is given (``decoder``: pillow | opencv), else a text step's for ``max_length`` tokens;
    ``budget``: request_budget_context's (its defaults when None); ``byte_copies``: how many copies of a request's
    bytes the text step holds (the token step passes its texts on: 6)."""
    limits = dict(budget) if budget is not None else request_budget_context(DEFAULT_MAX_REQUEST_BYTES, DEFAULT_STEP_MEMORY_MIB, 1, 1)
    if max_image_pixels is not None:
        return {**limits, "name": name, "kind": "image", "max_image_pixels": max_image_pixels, "decoder": decoder,
                "pixel_bytes": DECODE_BYTES_PER_PIXEL[decoder]}
    if max_length is None:
        raise ValueError("limits_readme_context needs max_image_pixels or max_length")  # a caller's bug
    return {**limits, "name": name, "kind": "text", "max_length": max_length, "text_bytes": max_length * TEXT_BYTES_PER_TOKEN,
            "long_texts": long_texts, "byte_copies": byte_copies}


def onnx_python_model_context(name: str, signature: Signature) -> dict[str, Any]:
    """The thread layout is not here: model.py reads it from its config's ``parameters`` at load."""
    return {
        "name": name,
        "model_file": "model.onnx",
        "inputs_map": {t.name: t.dtype for t in signature.inputs},
        "outputs_map": {t.name: t.dtype for t in signature.outputs},
    }
