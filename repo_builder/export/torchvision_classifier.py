"""Any torchvision image classifier -> model.onnx + signature.json + labels.txt.

The model comes from ``torchvision:NAME`` (torchvision's own architecture, with ``--weights
default|random|PATH``) or from a user's file (``PATH.pt``: a whole pickled model, or a state_dict with
``--arch NAME``). The resize/crop/mean/std the pipeline's preprocessing applies are the weights' own
transforms (``torchvision.models.get_model_weights(NAME).DEFAULT.transforms()``), recorded in signature.json.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError, require
from repo_builder.export.exporter import DEFAULT_OPSET, check_opset
from repo_builder.export.flow import (
    check_parity_phase,
    export_checked,
    exported_artifact,
    write_export_signature,
)
from repo_builder.export.parity import DEFAULT_TOLERANCE, check_tolerance, image_cases, torch_reference
from repo_builder.export.progress import Phases
from repo_builder.export.signature_build import LABELS_FILE, ONNX_FILE, package_versions, write_labels
from repo_builder.export.staging import staged_output
from repo_builder.fsutil import sha256_file
from repo_builder.spec import OnnxArtifact, ParityResult

INPUT_NAME = "pixel_values"
OUTPUT_NAME = "logits"
RANDOM_SEED = 0
PARITY_BATCH_SIZES = (1, 4, 8)  # 1, a typical dynamic-batching size, the largest batch rendered by default
PARITY_EXTRA_SIZE = (256, 320)  # with --dynamic-hw: a non-square size other than the crop
DOWNLOAD_TIMEOUT_S = 60.0
CHECKPOINT_KEYS = ("state_dict", "model_state_dict", "model")
TORCHVISION_PREFIX = "torchvision:"
WEIGHT_CHOICES = ("default", "random")
# torchvision's ImageNet transforms, for a pickled model whose architecture is not named (--arch).
IMAGENET_PREPROCESS = {"resize": 256, "crop": 224, "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
                       "interpolation": "bilinear", "antialias": True}


@dataclass(frozen=True)
class ModelChoice:
    """Where the classifier comes from: ``arch`` (a torchvision name) and/or a user's ``path``."""

    arch: str | None
    weights: str = "default"  # default | random | PATH to a state_dict (torchvision:NAME only)
    path: Path | None = None  # --model PATH.pt: a pickled model or a state_dict
    display: str = ""  # how messages name the architecture ("ResNet50")

    @property
    def name(self) -> str:
        return self.display or self.arch or (self.path.name if self.path else "model")


def classification_models() -> list[str]:
    """torchvision's classification architectures (not detection, segmentation, video, optical flow)."""
    import torchvision.models

    return sorted(torchvision.models.list_models(module=torchvision.models))


def parse_model(model: str, *, weights: str = "default", arch: str | None = None) -> ModelChoice:
    """``--model torchvision:NAME`` or ``--model PATH``; cheap checks only (no torch import)."""
    if model.startswith(TORCHVISION_PREFIX):
        name = model[len(TORCHVISION_PREFIX):]
        if arch is not None and arch != name:
            raise UserError(f"--arch {arch}: --model {model} already names the architecture; drop --arch")
        return ModelChoice(arch=name, weights=weights)
    if weights != "default":
        raise UserError(f"--weights {weights}: only with --model torchvision:NAME; a --model PATH carries its own weights")
    path = Path(model).expanduser()
    if not path.is_file():
        raise UserError(
            f"--model {model}: no such file; pass torchvision:NAME (e.g. torchvision:efficientnet_b0) or a .pt file"
        )
    return ModelChoice(arch=arch, path=path)


def check_arch(arch: str) -> None:
    names = classification_models()
    if arch not in names:
        close = [n for n in names if n.startswith(arch[:4])][:6] or names[:6]
        raise UserError(f"'{arch}' is not a torchvision classification model; try one of {', '.join(close)} ...")


def export_torchvision_classifier(
    out_dir: Path,
    choice: ModelChoice,
    *,
    opset: int = DEFAULT_OPSET,
    dynamic_hw: bool = False,
    check_parity: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: bool = False,
    phases: Phases | None = None,
) -> OnnxArtifact:
    """Export the classifier with a dynamic batch axis (optionally dynamic height/width) to ``out_dir``."""
    tolerance = check_tolerance(tolerance)
    torch = require("torch", "export", "image classifier export")
    require("torchvision", "export", "image classifier export")
    opset = check_opset(opset)
    phases = phases or Phases(progress)
    with phases.phase(f"loading {choice.name} ({choice.weights if choice.path is None else choice.path.name})"):
        model, source = load_classifier(choice, progress=progress)
    preprocess = preprocess_for(choice.arch)
    crop = int(preprocess["crop"])
    # Batch 2, not 1, so nothing in the trace can specialise on a batch of one.
    example = torch.randn(2, 3, crop, crop, generator=torch.Generator().manual_seed(RANDOM_SEED))
    num_classes = _count_classes(model, example)
    axes = {0: "batch", 2: "height", 3: "width"} if dynamic_hw else {0: "batch"}
    dynamic_axes = {INPUT_NAME: axes, OUTPUT_NAME: {0: "batch"}}

    with staged_output(out_dir) as staging:
        onnx_path = staging / ONNX_FILE
        export_checked(phases, model, (example,), onnx_path, input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                       dynamic_axes=dynamic_axes, opset=opset)
        parity: tuple[ParityResult, ...] = ()
        if check_parity:
            cases = image_cases(INPUT_NAME, PARITY_BATCH_SIZES, [(crop, crop)])
            if dynamic_hw:
                cases += image_cases(INPUT_NAME, (2,), [PARITY_EXTRA_SIZE])
            parity = check_parity_phase(phases, onnx_path, torch_reference(model, [INPUT_NAME]), cases, tolerance)
        labels = write_labels(_labels(choice.arch, num_classes), staging / LABELS_FILE)
        metadata: dict[str, Any] = {
            "task": "image-classification",
            "source": source,
            **({"source_sha256": source["sha256"]} if source.get("sha256") else {}),
            **package_versions("torchvision"),
            "num_classes": num_classes,
            "dynamic_hw": dynamic_hw,
            "parity_tolerance": tolerance,
            "preprocess": {**preprocess, "layout": "NCHW", "color": "RGB", "scale": "pixels / 255 before mean/std"},
        }
        signature = write_export_signature(staging, onnx_path, dynamic_axes, metadata, parity)
    return exported_artifact(out_dir, signature, labels)


def default_weights(arch: str) -> Any:
    """The weights enum member torchvision calls DEFAULT for ``arch`` (its transforms and categories)."""
    from torchvision.models import get_model_weights

    return get_model_weights(arch).DEFAULT


def preprocess_for(arch: str | None) -> dict[str, Any]:
    """resize (shorter side), crop, mean, std, interpolation, antialias: the weights' own transforms."""
    if arch is None:
        return dict(IMAGENET_PREPROCESS)
    transforms = default_weights(arch).transforms()
    return {
        "resize": int(transforms.resize_size[0]),
        "crop": int(transforms.crop_size[0]),
        "mean": [float(m) for m in transforms.mean],
        "std": [float(s) for s in transforms.std],
        "interpolation": transforms.interpolation.value,
        "antialias": bool(transforms.antialias),
    }


def _labels(arch: str | None, num_classes: int) -> list[str]:
    categories = list(default_weights(arch).meta.get("categories") or []) if arch else []
    if num_classes == len(categories):
        return categories
    return [f"class_{index}" for index in range(num_classes)]


def _count_classes(model: Any, example: Any) -> int:
    import torch

    with torch.no_grad():
        logits = model(example)
    if not isinstance(logits, torch.Tensor) or logits.ndim != 2:
        raise UserError("the model's output is not one (batch, classes) tensor; an image classifier returns logits")
    return int(logits.shape[1])


def load_classifier(choice: ModelChoice, *, progress: bool = False) -> tuple[Any, dict[str, Any]]:
    """The model in eval mode and a description of where its weights came from."""
    if choice.path is not None:
        return _load_user_model(choice)
    assert choice.arch is not None
    check_arch(choice.arch)
    if choice.weights == "random":
        return _random_model(choice.arch), {
            "model": f"torchvision.models.{choice.arch}", "weights": "random", "seed": RANDOM_SEED}
    if choice.weights == "default":
        return _pretrained_model(choice.arch, progress=progress)
    return _model_from_state_file(choice, Path(choice.weights).expanduser(), option=f"--weights {choice.weights}")


def _random_model(arch: str, num_classes: int | None = None) -> Any:
    torch = require("torch", "export", "image classifier export")
    from torchvision.models import get_model

    extra = {} if num_classes is None else {"num_classes": num_classes}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(RANDOM_SEED)
        model = get_model(arch, weights=None, **extra)
    return model.eval()


def _pretrained_model(arch: str, *, progress: bool) -> tuple[Any, dict[str, Any]]:
    """DEFAULT weights through torch.hub's cache ($TORCH_HOME/hub/checkpoints); offline -> one-line error."""
    import torch.hub
    from torchvision.models import get_model

    weights = default_weights(arch)
    cached = Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name
    previous_timeout = socket.getdefaulttimeout()
    # torch.hub opens the URL without a timeout: behind a firewall that drops packets it would wait forever.
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        state = weights.get_state_dict(progress=progress, check_hash=True)
    except Exception as exc:  # URLError/timeouts (OSError), a bad hash (RuntimeError), a corrupt cached file
        reason = _first_line(getattr(exc, "reason", None) or exc)
        named = "imagenet" if arch == "resnet50" else "default"
        raise UserError(
            f"--weights {named}: cannot get {weights.url} ({reason}); offline, copy that file to {cached}, "
            f"pass --weights PATH to a local state_dict, or use --weights random"
        ) from None
    finally:
        socket.setdefaulttimeout(previous_timeout)
    model = get_model(arch, weights=None)
    model.load_state_dict(state)
    source = {"model": f"torchvision.models.{arch}", "weights": str(weights), "url": weights.url,
              "sha256": sha256_file(cached) if cached.is_file() else ""}
    return model.eval(), source


def _model_from_state_file(choice: ModelChoice, path: Path, option: str) -> tuple[Any, dict[str, Any]]:
    """``arch`` with a state_dict from ``path``; the class count comes from the state's last layer."""
    if not path.is_file():
        raise UserError(f"{option}: no such file; use 'default', 'random', or a path to a {choice.name} state_dict")
    assert choice.arch is not None
    state = _state_dict_from_file(path, option)
    model = _random_model(choice.arch, _state_classes(choice.arch, state))
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise UserError(f"{option}: not a {choice.name} state_dict ({_summarize_load_error(exc)})") from None
    source = {"model": f"torchvision.models.{choice.arch}", "weights": str(path.resolve()), "sha256": sha256_file(path)}
    return model.eval(), source


def _state_classes(arch: str, state: dict[str, Any]) -> int | None:
    """The class count a state_dict was trained for: the first dim of the architecture's last Linear weight."""
    import torch

    model = _random_model(arch)
    last = [name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)]
    weight = state.get(f"{last[-1]}.weight") if last else None
    return int(weight.shape[0]) if weight is not None and getattr(weight, "ndim", 0) == 2 else None


def _load_user_model(choice: ModelChoice) -> tuple[Any, dict[str, Any]]:
    """``--model PATH``: a state_dict (needs --arch) or, failing that, a whole pickled model."""
    torch = require("torch", "export", "image classifier export")
    assert choice.path is not None
    path = choice.path
    try:
        # weights_only first: a state_dict is data and loads without running anything from the file.
        loaded: Any = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception:
        loaded = None
    if isinstance(loaded, dict):
        if choice.arch is None:
            raise UserError(f"--model {path}: holds a state_dict; name its architecture with --arch NAME (e.g. --arch resnet18)")
        check_arch(choice.arch)
        return _model_from_state_file(choice, path, option=f"--model {path}")
    model = _unpickle_model(path)
    if choice.arch is not None:
        check_arch(choice.arch)
    source = {"model": f"{type(model).__module__}.{type(model).__name__}", "weights": str(path.resolve()),
              "sha256": sha256_file(path), "arch": choice.arch}
    return model.eval(), source


def _unpickle_model(path: Path) -> Any:
    torch = require("torch", "export", "image classifier export")
    try:
        # A whole pickled model is code: torch.load must run it (weights_only=False). This is the user's own
        # file given on the command line; --help says to pass only files they trust.
        model = torch.load(str(path), map_location="cpu", weights_only=False)
    except Exception as exc:  # pickle, zip and attribute errors have no common base
        raise UserError(
            f"--model {path}: not a readable model or state_dict ({type(exc).__name__}: {_first_line(exc)[:200]}); "
            "save one with torch.save(model, PATH) or torch.save(model.state_dict(), PATH)"
        ) from None
    if not isinstance(model, torch.nn.Module):
        raise UserError(f"--model {path}: holds a {type(model).__name__}, not a torch model or state_dict")
    return model


def _state_dict_from_file(path: Path, option: str) -> dict[str, Any]:
    torch = require("torch", "export", "image classifier export")
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            loaded: Any = load_file(str(path), device="cpu")
        else:
            # weights_only: a checkpoint is data, never code to run.
            loaded = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle, zip and safetensors errors have no common base
        raise UserError(
            f"{option}: not a readable state_dict or checkpoint ({type(exc).__name__}: {_first_line(exc)[:200]}); "
            "save one with torch.save(model.state_dict(), PATH)"
        ) from None
    if isinstance(loaded, dict):
        loaded = next((loaded[k] for k in CHECKPOINT_KEYS if isinstance(loaded.get(k), dict)), loaded)
    if not isinstance(loaded, dict) or not loaded or not all(isinstance(v, torch.Tensor) for v in loaded.values()):
        raise UserError(f"{option}: holds no state_dict of tensors; save one with torch.save(model.state_dict(), PATH)")
    # Checkpoints saved from DataParallel / DistributedDataParallel prefix every key with 'module.'.
    return {key.removeprefix("module."): value for key, value in loaded.items()}


def _summarize_load_error(exc: RuntimeError) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines[1:3] or lines[:1])[:300]


def _first_line(error: object) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
