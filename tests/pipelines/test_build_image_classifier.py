"""`build image-classifier`: any torchvision classifier (torchvision:NAME) or a user's fine-tuned .pt, end to end.

EfficientNet-B0 with seeded random weights is built once, served by the real embedded Triton and compared
with PyTorch running the weights' own transforms on the same images.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from repo_builder.cli.main import main

pytestmark = [pytest.mark.slow]
TOP_K = 3


def make_image(width: int, height: int, seed: int) -> bytes:
    from PIL import Image

    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    image = Image.fromarray(coarse, "RGB").resize((width, height), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=92)
    return buffer.getvalue()


def test_torchvision_preprocess_is_the_weights_own_transforms_when_exported(tmp_path: Path) -> None:
    from torchvision.models import get_model_weights

    from repo_builder.export.torchvision_classifier import ModelChoice, export_torchvision_classifier

    artifact = export_torchvision_classifier(tmp_path / "x", ModelChoice("efficientnet_b0", "random"), check_parity=False)
    transforms = get_model_weights("efficientnet_b0").DEFAULT.transforms()
    pre = artifact.signature.metadata["preprocess"]
    assert (pre["resize"], pre["crop"], pre["interpolation"]) == (transforms.resize_size[0], transforms.crop_size[0], "bicubic")
    assert pre["mean"] == list(transforms.mean) and pre["std"] == list(transforms.std)
    assert len(artifact.labels) == 1000 and artifact.labels[0] == "tench"


@pytest.fixture(scope="module")
def efficientnet_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("efficientnet-repo")
    # Resized with torch (--resize-with): served here, the bicubic twin of torchvision's PIL resize; the resnet50
    # end-to-end tests serve the default Pillow step. torch is too large to ship: the image built from the
    # Dockerfile has it (--step-packages dockerfile), and the embedded server here uses the builder's own.
    argv = ["build", "image-classifier", "--model", "torchvision:efficientnet_b0", "--weights", "random", "--runtime", "python",
            "--out", str(repo), "--top-k", str(TOP_K), "--name", "effnet", "--resize-with", "torch", "--format", "json", "-q",
            "--step-packages", "dockerfile"]
    assert main(argv) == 0
    return repo


@pytest.fixture(scope="module")
def efficientnet_server(efficientnet_repo: Path) -> Iterator[Any]:
    from repo_builder.triton import start_server

    with start_server(efficientnet_repo, mode="explicit") as server:
        server.load("effnet")
        yield server


@pytest.mark.triton
def test_efficientnet_ensemble_matches_pytorch_when_built_from_torchvision_name(efficientnet_server: Any, efficientnet_repo: Path) -> None:
    import torch
    from PIL import Image
    from torchvision.models import get_model_weights

    from repo_builder.export.torchvision_classifier import ModelChoice, load_classifier
    from repo_builder.triton.client import connect, infer_model

    model, _ = load_classifier(ModelChoice("efficientnet_b0", "random"))  # the same seeded weights
    weights = get_model_weights("efficientnet_b0").DEFAULT
    transforms, labels = weights.transforms(), weights.meta["categories"]
    assert "RESIZE_WITH = 'torch'" in (efficientnet_repo / "effnet_preprocess" / "1" / "model.py").read_text()
    images = [make_image(320, 240, 0), make_image(500, 375, 1)]
    outputs = infer_model(connect(efficientnet_server.grpc_url), "effnet", {"IMAGE": np.array([[b] for b in images], dtype=np.object_)})
    for row, data in enumerate(images):
        with torch.no_grad():
            probabilities = torch.softmax(model(transforms(Image.open(io.BytesIO(data)).convert("RGB")).unsqueeze(0)), dim=1)[0]
        scores, ids = torch.topk(probabilities, TOP_K)
        np.testing.assert_allclose(outputs["SCORES"][row], scores.numpy(), atol=1e-3)
        assert outputs["LABELS"][row][0].decode() == labels[int(ids[0])] or np.isclose(scores[0], scores[1], atol=1e-3)


def _fine_tuned(tmp_path: Path, *, whole: bool) -> Path:
    import torch
    from torchvision.models import mobilenet_v3_small

    torch.manual_seed(4)
    model = mobilenet_v3_small(num_classes=4).eval()
    path = tmp_path / ("model.pt" if whole else "state.pt")
    torch.save(model if whole else {"epoch": 2, "state_dict": model.state_dict()}, path)
    return path


@pytest.mark.parametrize("whole", [False, True])
def test_build_image_classifier_uses_the_users_labels_when_model_is_a_fine_tuned_file(whole: bool, tmp_path: Path, capsys: Any) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("cat\ndog\nbird\nfish\n")
    path = _fine_tuned(tmp_path, whole=whole)
    repo = tmp_path / "repo"
    code = main(["build", "image-classifier", "--model", str(path), "--arch", "mobilenet_v3_small", "--labels", str(labels),
                 "--runtime", "python", "--out", str(repo), "--name", "pets", "--format", "json", "-q"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["validation"]["ok"] is True
    assert (repo / "pets_postprocess" / "1" / "labels.txt").read_text() == "cat\ndog\nbird\nfish\n"
    assert "dims: [ 4 ]" in (repo / "pets_model" / "config.pbtxt").read_text()


def test_build_image_classifier_refuses_state_dict_in_one_line_when_arch_is_missing(tmp_path: Path, capsys: Any) -> None:
    path = _fine_tuned(tmp_path, whole=False)
    code = main(["build", "image-classifier", "--model", str(path), "--runtime", "python", "--out", str(tmp_path / "repo")])
    err = capsys.readouterr().err
    assert code == 2 and err.splitlines()[-1].startswith("error: --model") and "--arch" in err.splitlines()[-1]
    assert "Traceback" not in err


def test_build_image_classifier_refuses_unknown_torchvision_name_in_one_line(tmp_path: Path, capsys: Any) -> None:
    code = main(["build", "image-classifier", "--model", "torchvision:resnet5O", "--out", str(tmp_path / "repo")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "resnet50" in err
    assert not (tmp_path / "repo").exists()
