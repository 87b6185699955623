"""The generated image step (draft decoding, crop-box resize, uint8 layout first) against torchvision's transforms,
with either resizer (``--resize-with pillow``, the default, or ``torch``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support.perf_steps import write_image_preprocess

MEAN_LIMIT = 0.02  # issue 15: normalised units, per image size
MAX_LIMIT = 0.25


@pytest.fixture(scope="module")
def transforms():
    from torchvision.models import ResNet50_Weights

    return ResNet50_Weights.IMAGENET1K_V2.transforms()


RESIZERS = ("pillow", "torch")


@pytest.mark.slow
@pytest.mark.parametrize("resize_with", RESIZERS)
def test_image_preprocess_matches_torchvision_when_photos_of_every_size(tmp_path: Path, transforms, resize_with: str) -> None:
    from accuracy import image_accuracy

    figures = image_accuracy(write_image_preprocess(tmp_path, resize_with=resize_with), transforms, count=3)
    assert set(figures) == {"500x375", "1920x1080", "4032x3024"}
    for size, figure in figures.items():
        assert figure["mean_abs"] <= MEAN_LIMIT, (size, figure)
        assert figure["max_abs"] <= MAX_LIMIT, (size, figure)


@pytest.mark.parametrize("resize_with", RESIZERS)
def test_image_preprocess_equals_full_resize_then_crop_when_no_draft(tmp_path: Path, transforms, resize_with: str) -> None:
    """Resizing only the crop's region (Pillow), or the whole image with torch's uint8 kernel, gives torchvision's
    pixels, not an approximation of them."""
    from accuracy import image_accuracy

    figures = image_accuracy(write_image_preprocess(tmp_path, draft_margin=0, resize_with=resize_with), transforms, count=2, sizes=("500x375",))
    # One gray level is 1 / (255 * 0.225) = 0.017 normalised units: at most PIL's fixed-point rounding apart.
    assert figures["500x375"]["max_abs"] <= 0.02, figures


def test_torch_resize_matches_torchvision_when_the_weights_resize_bicubic(tmp_path: Path) -> None:
    from accuracy import image_accuracy
    from torchvision.models import EfficientNet_B0_Weights

    weights = EfficientNet_B0_Weights.DEFAULT.transforms()  # resize 256 bicubic, crop 224
    preprocess = {"resize": 256, "crop": 224, "mean": list(weights.mean), "std": list(weights.std), "interpolation": "bicubic"}
    step = write_image_preprocess(tmp_path, draft_margin=0, resize_with="torch", preprocess=preprocess)
    figures = image_accuracy(step, weights, count=2, sizes=("500x375",))
    assert figures["500x375"]["max_abs"] <= 0.02, figures


def test_torch_step_decodes_full_scale_jpegs_with_torchvision_to_the_same_pixels_when_available(tmp_path: Path) -> None:
    """A colour JPEG decoded at full scale goes through torchvision's decoder (no Pillow copies), with Pillow's exact
    pixels; drafted, grey, PNG and broken images stay with Pillow, and without torchvision everything does."""
    import io

    from accuracy import load_step
    from photos import photo
    from PIL import Image

    module = load_step(write_image_preprocess(tmp_path, resize_with="torch"), "torchvision_decode_step")
    model = module.TritonPythonModel()
    model.initialize({})

    def decoded_by_torchvision(data: bytes) -> bool:
        image = Image.open(io.BytesIO(data))
        size = image.size
        image.draft("RGB", tuple(side * module.DRAFT_MARGIN for side in module.resized_size(*size)))
        return model.full_scale_jpeg(image, data, size) is not None

    small, large = photo(500, 375, seed=2), photo(1920, 1080, seed=2)
    grey, png = io.BytesIO(), io.BytesIO()
    Image.open(io.BytesIO(small)).convert("L").save(grey, format="JPEG")
    Image.open(io.BytesIO(small)).save(png, format="PNG")
    assert decoded_by_torchvision(small)
    assert not decoded_by_torchvision(large)  # draft decodes it at 1/2 scale: Pillow's
    assert not decoded_by_torchvision(grey.getvalue()) and not decoded_by_torchvision(png.getvalue())
    assert not decoded_by_torchvision(small[: len(small) // 2])  # truncated: Pillow names the error

    rows = np.zeros((2, 3, 224, 224), dtype=np.float32)
    model.fill(rows, 0, small)
    decode_jpeg, module.decode_jpeg = module.decode_jpeg, None  # as where torchvision is missing
    try:
        assert not decoded_by_torchvision(small)
        model.fill(rows, 1, small)
    finally:
        module.decode_jpeg = decode_jpeg
    assert np.array_equal(rows[0], rows[1])  # the same libjpeg-turbo pixels either way
    model.finalize()


def test_torch_resize_step_names_the_fix_when_torch_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from accuracy import load_step

    monkeypatch.setitem(__import__("sys").modules, "torch", None)  # as in a server environment without torch
    with pytest.raises(ImportError, match=r"built with --resize-with torch.*pip install torch.*--resize-with pillow"):
        load_step(write_image_preprocess(tmp_path, resize_with="torch"), "torchless_step")


def test_image_preprocess_fails_only_its_request_when_bytes_are_not_an_image(tmp_path: Path) -> None:
    from accuracy import load_step
    from photos import photo

    module = load_step(write_image_preprocess(tmp_path), "bad_image_step")
    model = module.TritonPythonModel()
    model.initialize({})
    batch = np.zeros((2, 3, 224, 224), dtype=np.float32)
    model.fill(batch, 0, photo(320, 240, seed=1))
    with pytest.raises(Exception):  # noqa: B017 - PIL's UnidentifiedImageError; execute() turns it into that request's error
        model.fill(batch, 1, b"not an image")
    assert np.abs(batch[0]).sum() > 0
    model.finalize()


def _encoded(image, fmt: str) -> bytes:
    import io

    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("mode", "fmt", "size"),
    [("RGBA", "PNG", (300, 260)), ("L", "JPEG", (1600, 1200)), ("CMYK", "JPEG", (640, 480)), ("P", "PNG", (260, 300))],
)
def test_image_preprocess_matches_torchvision_when_image_is_not_rgb(tmp_path: Path, transforms, mode: str, fmt: str, size: tuple[int, int]) -> None:
    import io

    from accuracy import load_step, reference_output, step_output
    from photos import photo
    from PIL import Image

    source = Image.open(io.BytesIO(photo(*size, seed=3))).convert(mode)
    data = _encoded(source, fmt)
    module = load_step(write_image_preprocess(tmp_path), f"mode_step_{mode}")
    model = module.TritonPythonModel()
    model.initialize({})
    diff = np.abs(step_output(model, module, [data]) - reference_output(transforms, [data]))
    model.finalize()
    assert diff.mean() <= MEAN_LIMIT and diff.max() <= MAX_LIMIT, (mode, float(diff.mean()), float(diff.max()))
