"""End to end: `repo-builder build` -> the real embedded Triton -> tritonclient.grpc, against PyTorch.

ResNet50 (random, seeded weights) and a tiny BERT are built once per module; the server runs once per
pipeline. Every answer is compared with a PyTorch reference computed here from the same inputs.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from repo_builder.cli.main import main
from repo_builder.triton_images import newest_release

pytestmark = [pytest.mark.triton, pytest.mark.slow]
TOP_K = 5


@pytest.fixture(scope="module")
def resnet_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from repo_builder.triton import start_server

    repo = tmp_path_factory.mktemp("resnet-repo")
    code = main(["build", "resnet50", "--weights", "random", "--runtime", "python", "--out", str(repo), "--skip-parity", "--top-k", str(TOP_K)])
    assert code == 0
    with start_server(repo, mode="explicit") as server:
        server.load("resnet50")
        yield server


@pytest.fixture(scope="module")
def resnet_reference() -> Any:
    import torch
    from torchvision.models import ResNet50_Weights

    from repo_builder.export.resnet50 import load_resnet50

    model, _ = load_resnet50("random")  # the same seeded weights `--weights random` exported
    transforms = ResNet50_Weights.IMAGENET1K_V2.transforms()
    labels = ResNet50_Weights.IMAGENET1K_V2.meta["categories"]

    def reference(data: bytes) -> tuple[list[str], np.ndarray]:
        from PIL import Image

        image = Image.open(io.BytesIO(data)).convert("RGB")
        with torch.no_grad():
            probabilities = torch.softmax(model(transforms(image).unsqueeze(0)), dim=1)[0]
        scores, ids = torch.topk(probabilities, TOP_K)
        return [labels[i] for i in ids.tolist()], scores.numpy()

    return reference


def make_image(width: int, height: int, fmt: str, seed: int, mode: str = "RGB") -> bytes:
    """Smooth random colour fields with some edges, so resizing and cropping matter."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)
    image = Image.fromarray(coarse, "RGB").resize((width, height), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(image)
    for _ in range(4):
        x, y = int(rng.integers(0, width - 20)), int(rng.integers(0, height - 20))
        draw.rectangle((x, y, x + int(rng.integers(10, width // 3)), y + int(rng.integers(10, height // 3))), fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
    buffer = io.BytesIO()
    image.convert(mode).save(buffer, format=fmt, **({"quality": 92} if fmt == "JPEG" else {}))
    return buffer.getvalue()


IMAGES = [
    (320, 240, "JPEG", "RGB"),
    (240, 320, "PNG", "RGB"),
    (500, 375, "JPEG", "RGB"),
    (256, 256, "PNG", "RGBA"),
    (300, 231, "PNG", "L"),
    (1600, 1200, "JPEG", "RGB"),  # large enough for JPEG draft decoding at 1/2 scale
]


def image_request(server: Any, images: list[bytes]) -> dict[str, np.ndarray]:
    from repo_builder.triton.client import connect, infer_model

    client = connect(server.grpc_url)  # one client per thread
    return infer_model(client, "resnet50", {"IMAGE": np.array([[b] for b in images], dtype=np.object_)})


def assert_matches(outputs: dict[str, np.ndarray], row: int, labels: list[str], scores: np.ndarray) -> None:
    got_labels = [x.decode() for x in outputs["LABELS"][row]]
    assert got_labels[0] == labels[0]
    np.testing.assert_allclose(outputs["SCORES"][row], scores, atol=1e-3)
    assert got_labels[: len(labels)] == labels or np.allclose(np.diff(scores), 0, atol=1e-3)


def test_image_ensemble_matches_pytorch_when_images_sent_concurrently(resnet_server: Any, resnet_reference: Any) -> None:
    images = [make_image(w, h, fmt, seed, mode) for seed, (w, h, fmt, mode) in enumerate(IMAGES)]
    with ThreadPoolExecutor(len(images)) as pool:
        results = list(pool.map(lambda data: image_request(resnet_server, [data]), images))
    for data, outputs in zip(images, results, strict=True):
        assert outputs["LABELS"].shape == (1, TOP_K)
        labels, scores = resnet_reference(data)
        assert_matches(outputs, 0, labels, scores)
        assert outputs["CLASS_IDS"].dtype == np.int64


def test_image_ensemble_answers_every_row_when_one_request_carries_several_images(resnet_server: Any, resnet_reference: Any) -> None:
    images = [make_image(400, 300, "JPEG", 10), make_image(333, 500, "PNG", 11)]
    outputs = image_request(resnet_server, images)
    assert outputs["SCORES"].shape == (2, TOP_K)
    for row, data in enumerate(images):
        labels, scores = resnet_reference(data)
        assert_matches(outputs, row, labels, scores)


def test_image_ensemble_fails_only_that_request_when_bytes_are_not_an_image(resnet_server: Any) -> None:
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException, match="cannot decode image"):
        image_request(resnet_server, [b"definitely not an image"])
    assert image_request(resnet_server, [make_image(300, 300, "PNG", 3)])["LABELS"].shape == (1, TOP_K)


@pytest.fixture(scope="module")
def text_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    return make_tiny_text_classifier(tmp_path_factory.mktemp("tiny-bert"), num_labels=3, seed=0)


@pytest.fixture(scope="module")
def text_server(text_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from repo_builder.triton import start_server

    repo = tmp_path_factory.mktemp("text-repo")
    code = main(["build", "text-classifier", "--model", str(text_model), "--runtime", "python", "--out", str(repo), "--skip-parity", "--name", "sentiment"])
    assert code == 0
    with start_server(repo, mode="explicit") as server:
        server.load("sentiment")
        yield server


TEXTS = [
    "this movie was wonderful",
    "terrible",
    "the quick brown fox jumps over the lazy dog and then triton serves models from a repository " * 2,
    "numbers like 1 2 3 and 2026 appear too, with punctuation! " * 30,  # longer than the 128-token maximum
    "",
    "ünïcödé wörds and emoji 🙂 still tokenize",
]


def test_text_ensemble_matches_pytorch_when_texts_of_different_lengths_sent_concurrently(text_server: Any, text_model: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from repo_builder.triton.client import connect, infer_model

    model = AutoModelForSequenceClassification.from_pretrained(text_model).eval()
    tokenizer = AutoTokenizer.from_pretrained(text_model)
    id2label = model.config.id2label

    def send(text: str) -> dict[str, np.ndarray]:
        return infer_model(connect(text_server.grpc_url), "sentiment", {"TEXT": np.array([[text.encode()]], dtype=np.object_)})

    with ThreadPoolExecutor(len(TEXTS)) as pool:
        results = list(pool.map(send, TEXTS))
    for text, outputs in zip(TEXTS, results, strict=True):
        encoded = tokenizer(text, truncation=True, max_length=128, return_tensors="pt")
        with torch.no_grad():
            probabilities = torch.softmax(model(**encoded).logits, dim=1)[0]
        scores, ids = torch.topk(probabilities, 3)
        got = [x.decode() for x in outputs["LABELS"][0]]
        assert got[0] == id2label[int(ids[0])], text
        np.testing.assert_allclose(outputs["SCORES"][0], scores.numpy(), atol=1e-3)
        assert outputs["CLASS_IDS"][0].tolist() == ids.tolist() or np.allclose(np.diff(scores.numpy()), 0, atol=1e-3)


def test_text_preprocess_pads_to_multiple_of_8_when_batch_has_different_lengths(text_server: Any) -> None:
    outputs = text_server.infer("sentiment_preprocess", {"TEXT": np.array([[b"short"], [b"a somewhat longer text than the first one"]], dtype=np.object_)})
    ids, mask = outputs["input_ids"], outputs["attention_mask"]
    assert ids.dtype == np.int64 and ids.shape[0] == 2
    assert ids.shape[1] % 8 == 0 and ids.shape[1] - int(mask.sum(axis=1).max()) < 8  # the batch's longest, rounded up
    assert set(outputs) == {"input_ids", "attention_mask", "token_type_ids"}


def test_build_live_loads_every_model_and_answers_when_asked(text_model: Path, tmp_path: Path, capsys: Any) -> None:
    code = main(["build", "text-classifier", "--model", str(text_model), "--runtime", "python", "--out", str(tmp_path), "--skip-parity", "--live", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    validation = json.loads(captured.out)["validation"]
    newest = newest_release()
    assert validation["command"].endswith(f"validate {tmp_path} --gpu --triton-release {newest} --live")
    live = validation["live"]
    assert set(live) == {"text_classifier", "text_classifier_preprocess", "text_classifier_model", "text_classifier_postprocess"}
    assert all(v["loaded"] for v in live.values())
    assert live["text_classifier"]["inferred"] is True
