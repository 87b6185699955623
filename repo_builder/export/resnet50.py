"""torchvision ResNet50 -> model.onnx + signature.json + labels.txt."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError, require
from repo_builder.export.exporter import DEFAULT_OPSET, check_opset
from repo_builder.export.flow import (
    check_parity_step,
    export_checked,
    exported_artifact,
    write_export_signature,
)
from repo_builder.export.parity import (
    DEFAULT_TOLERANCE,
    check_tolerance,
    image_cases,
    torch_reference,
)
from repo_builder.export.progress import Steps
from repo_builder.export.signature_build import (
    LABELS_FILE,
    ONNX_FILE,
    package_versions,
    write_labels,
)
from repo_builder.export.staging import staged_output
from repo_builder.fsutil import sha256_file
from repo_builder.spec import OnnxArtifact

INPUT_NAME = "pixel_values"
OUTPUT_NAME = "logits"
RANDOM_SEED = 0
# 1, a typical dynamic-batching size, and the largest batch the pipelines render by default.
PARITY_BATCH_SIZES = (1, 4, 8)
PARITY_EXTRA_SIZE = (256, 320)  # with --dynamic-hw: a non-square size other than the crop
DOWNLOAD_TIMEOUT_S = 60.0
CHECKPOINT_KEYS = ("state_dict", "model_state_dict", "model")


def export_resnet50(
    out_dir: Path,
    *,
    weights: str = "imagenet",
    opset: int = DEFAULT_OPSET,
    dynamic_hw: bool = False,
    check_parity: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: bool = False,
) -> OnnxArtifact:
    """Export ResNet50 with a dynamic batch axis (and optionally dynamic height/width) to ``out_dir``.

    ``weights``: "imagenet" (torchvision IMAGENET1K_V2 through torch's download cache), "random" (seeded),
    or a path to a state_dict / checkpoint (``.pt``, ``.pth``, ``.safetensors``).
    """
    tolerance = check_tolerance(tolerance)
    torch = require("torch", "export", "ResNet50 export")
    require("torchvision", "export", "ResNet50 export")
    opset = check_opset(opset)
    steps = Steps(progress)
    with steps.step(f"loading ResNet50 ({weights} weights)"):
        model, source = load_resnet50(weights, progress=progress)
    num_classes = int(model.fc.out_features)
    transforms = _imagenet_weights().transforms()
    crop = int(transforms.crop_size[0])

    axes = {0: "batch", 2: "height", 3: "width"} if dynamic_hw else {0: "batch"}
    dynamic_axes = {INPUT_NAME: axes, OUTPUT_NAME: {0: "batch"}}
    # Batch 2, not 1, so nothing in the trace can specialise on a batch of one.
    example = torch.randn(2, 3, crop, crop, generator=torch.Generator().manual_seed(RANDOM_SEED))

    with staged_output(out_dir) as staging:
        onnx_path = staging / ONNX_FILE
        export_checked(
            steps,
            model,
            (example,),
            onnx_path,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes=dynamic_axes,
            opset=opset,
        )
        parity = ()
        if check_parity:
            cases = image_cases(INPUT_NAME, PARITY_BATCH_SIZES, [(crop, crop)])
            if dynamic_hw:
                cases += image_cases(INPUT_NAME, (2,), [PARITY_EXTRA_SIZE])
            parity = check_parity_step(steps, onnx_path, torch_reference(model, [INPUT_NAME]), cases, tolerance)
        labels = write_labels(_labels(num_classes), staging / LABELS_FILE)
        metadata: dict[str, Any] = {
            "task": "image-classification",
            "source": source,
            **({"source_sha256": source["sha256"]} if source.get("sha256") else {}),
            **package_versions("torchvision"),
            "num_classes": num_classes,
            "dynamic_hw": dynamic_hw,
            "parity_tolerance": tolerance,
            "preprocess": {
                "resize": int(transforms.resize_size[0]),  # shorter side, before the centre crop
                "crop": crop,
                "mean": [float(m) for m in transforms.mean],
                "std": [float(s) for s in transforms.std],
                "interpolation": transforms.interpolation.value,
                "antialias": bool(transforms.antialias),
                "layout": "NCHW",
                "color": "RGB",
                "scale": "pixels / 255 before mean/std",
            },
        }
        signature = write_export_signature(staging, onnx_path, dynamic_axes, metadata, parity)
    return exported_artifact(out_dir, signature, labels)


def _imagenet_weights() -> Any:
    from torchvision.models import ResNet50_Weights

    return ResNet50_Weights.IMAGENET1K_V2


def _labels(num_classes: int) -> list[str]:
    categories = list(_imagenet_weights().meta["categories"])
    if num_classes == len(categories):
        return categories
    return [f"class_{index}" for index in range(num_classes)]


def load_resnet50(weights: str, *, progress: bool = False) -> tuple[Any, dict[str, Any]]:
    """The model in eval mode and a description of where its weights came from."""
    torch = require("torch", "export", "ResNet50 export")
    from torchvision.models import resnet50

    if weights == "random":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(RANDOM_SEED)
            model = resnet50(weights=None)
        return model.eval(), {
            "model": "torchvision.models.resnet50",
            "weights": "random",
            "seed": RANDOM_SEED,
        }
    if weights == "imagenet":
        state, sha = _download_imagenet(progress=progress)
        model = resnet50(weights=None)
        model.load_state_dict(state)
        return model.eval(), {
            "model": "torchvision.models.resnet50",
            "weights": "ResNet50_Weights.IMAGENET1K_V2",
            "url": _imagenet_weights().url,
            "sha256": sha,
        }
    path = Path(weights).expanduser()
    if not path.is_file():
        raise UserError(
            f"--weights {weights}: no such file; use 'imagenet', 'random', or a path to a ResNet50 state_dict"
        )
    state = _state_dict_from_file(path)
    fc_weight = state.get("fc.weight")
    num_classes = int(fc_weight.shape[0]) if getattr(fc_weight, "ndim", 0) == 2 else 1000
    model = resnet50(weights=None, num_classes=num_classes)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise UserError(
            f"--weights {path}: not a ResNet50 state_dict ({_summarize_load_error(exc)})"
        ) from None
    return model.eval(), {
        "model": "torchvision.models.resnet50",
        "weights": str(path.resolve()),
        "sha256": sha256_file(path),
    }


def _download_imagenet(*, progress: bool) -> tuple[dict[str, Any], str]:
    """IMAGENET1K_V2 through torch.hub's cache ($TORCH_HOME/hub/checkpoints); offline -> one-line error."""
    import torch.hub

    weights = _imagenet_weights()
    cached = Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name
    previous_timeout = socket.getdefaulttimeout()
    # torch.hub opens the URL without a timeout: behind a firewall that drops packets it would wait forever.
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        state = weights.get_state_dict(progress=progress, check_hash=True)
    except Exception as exc:  # URLError/timeouts (OSError), a bad hash (RuntimeError), a corrupt cached file
        reason = _first_line(getattr(exc, "reason", None) or exc)
        raise UserError(
            f"--weights imagenet: cannot get {weights.url} ({reason}); offline, copy that file to {cached}, "
            f"pass --weights PATH to a local state_dict, or use --weights random"
        ) from None
    finally:
        socket.setdefaulttimeout(previous_timeout)
    return state, sha256_file(cached) if cached.is_file() else ""


def _state_dict_from_file(path: Path) -> dict[str, Any]:
    torch = require("torch", "export", "ResNet50 export")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            loaded: Any = load_file(str(path), device="cpu")
        else:
            # weights_only: a checkpoint is data, never code to run.
            loaded = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle, zip and safetensors errors have no common base
        raise UserError(
            f"--weights {path}: not a readable state_dict or checkpoint ({type(exc).__name__}: "
            f"{_first_line(exc)[:200]}); "
            "save one with torch.save(model.state_dict(), PATH)"
        ) from None
    if isinstance(loaded, dict):
        for key in CHECKPOINT_KEYS:
            if isinstance(loaded.get(key), dict):
                loaded = loaded[key]
                break
    if (
        not isinstance(loaded, dict)
        or not all(isinstance(v, torch.Tensor) for v in loaded.values())
        or not loaded
    ):
        raise UserError(
            f"--weights {path}: holds no state_dict of tensors; save one with torch.save(model.state_dict(), PATH)"
        )
    # Checkpoints saved from DataParallel / DistributedDataParallel prefix every key with 'module.'.
    return {key.removeprefix("module."): value for key, value in loaded.items()}


def _summarize_load_error(exc: RuntimeError) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    details = [line for line in lines[1:3]] or lines[:1]
    return "; ".join(details)[:300]


def _first_line(error: object) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
