"""A small random-weight Ultralytics detector and varied test images, built here (no download).

DESIGN.md §7: a detector built from the framework's yaml with random weights gives every anchor the same
score (BatchNorm's default running statistics flatten its features), so the batch norms are recalibrated on
letterboxed images first; the detector then has hundreds of candidates per image, which exercises NMS.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

IMGSZ = 160  # small: fast on CPU; 4K images become 160 x 96 rectangles
CLASS_LOGIT_SCALE = 0.15  # measured: 5% of scores exactly 1.0 (63% unscaled), detections on every test image size
YOLO26_HEAD = {"class_scale": 0.3, "class_bias": -3.0, "box_scale": 0.05, "box_bias": 0.7}  # in stride units


def offline_ultralytics(config_dir: Path) -> None:
    """Ultralytics writes its settings file under YOLO_CONFIG_DIR and must not reach the network."""
    os.environ.setdefault("YOLO_CONFIG_DIR", str(config_dir))
    os.environ["YOLO_OFFLINE"] = "1"


def calibration_images() -> list[np.ndarray]:
    """The two photos Ultralytics ships (BGR), and crops of them: real image statistics for the batch norms."""
    import cv2
    from ultralytics.utils import ASSETS

    photos = [cv2.imread(str(ASSETS / name)) for name in ("bus.jpg", "zidane.jpg")]
    crops = [photo[: photo.shape[0] // 2] for photo in photos] + [photo[:, : photo.shape[1] // 2] for photo in photos]
    return photos + crops


def tame_head(head: Any) -> None:
    """Class logits scaled down (scores spread over (conf, 1) instead of 63% ties at 1.0); YOLO26's one-to-one
    head made to differ from its one-to-many copy and its directly regressed box distances kept positive."""
    import torch

    one2one = getattr(head, "one2one_cv3", None)
    with torch.no_grad():  # tame the class logits: scores spread over (conf, 1) instead of 63% ties at 1.0
        for branch in head.cv3:
            branch[-1].weight.mul_(CLASS_LOGIT_SCALE)
            branch[-1].bias.mul_(CLASS_LOGIT_SCALE)
        if one2one is not None:  # YOLO26/v10: a one-to-one head, a copy of the other at init: made to differ
            for branch in one2one:
                branch[-1].weight.mul_(CLASS_LOGIT_SCALE * 1.2)
                branch[-1].bias.mul_(CLASS_LOGIT_SCALE * 1.2)
        if head.reg_max == 1:  # YOLO26 regresses distances directly: random ones flip boxes inside out
            measured = YOLO26_HEAD  # measured: detections on most test images, 10-20% of scores at 1.0
            for branches in (head.cv3, one2one or ()):
                for branch in branches:
                    branch[-1].weight.mul_(measured["class_scale"])
                    branch[-1].bias.mul_(measured["class_scale"]).add_(measured["class_bias"])
            for branches in (head.cv2, getattr(head, "one2one_cv2", None) or ()):
                for branch in branches:
                    branch[-1].weight.mul_(measured["box_scale"])
                    branch[-1].bias.fill_(measured["box_bias"])


def build_tiny_checkpoint(folder: Path, imgsz: int = IMGSZ, seed: int = 0, yaml: str = "yolov8n.yaml") -> Path:
    """``yaml`` (yolov8n, yolo26n ...) with seeded random weights and recalibrated batch norms, saved as a .pt."""
    offline_ultralytics(folder / "ultralytics-config")  # before Ultralytics is first imported: it reads them then
    import torch
    from ultralytics import YOLO
    from ultralytics.data.augment import LetterBox

    torch.manual_seed(seed)
    model = YOLO(yaml)
    batches = []
    for auto in (False, True):  # square (mixed shapes, static) and minimal rectangles (predict's usual)
        for image in calibration_images():
            boxed = LetterBox(imgsz, auto=auto, stride=32)(image=image)
            batches.append(torch.from_numpy(np.ascontiguousarray(boxed[..., ::-1].transpose(2, 0, 1))).float()[None] / 255)
    network = model.model
    for module in network.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.reset_running_stats()
            module.momentum = None  # a cumulative average over every batch below
    network.train()
    with torch.no_grad():
        for batch in batches:
            network(batch)
    network.eval()
    tame_head(network.model[-1])
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint = folder / f"tiny-{Path(yaml).stem}.pt"
    model.save(str(checkpoint))
    return checkpoint


def export_onnx(checkpoint: Path, name: str, imgsz: int = IMGSZ, **options: object) -> Path:
    """Ultralytics' exporter on ``checkpoint`` (its options: dynamic, simplify, nms ...), renamed ``name``.onnx beside it."""
    from ultralytics import YOLO

    exported = Path(YOLO(str(checkpoint), task="detect").export(format="onnx", imgsz=imgsz, verbose=False, **options))
    return exported.replace(checkpoint.parent / f"{name}.onnx")


def build_tiny_detector(folder: Path, imgsz: int = IMGSZ, seed: int = 0) -> tuple[Path, Path]:
    """yolov8n.yaml with seeded random weights and recalibrated batch norms: (checkpoint .pt, Ultralytics' ONNX)."""
    checkpoint = build_tiny_checkpoint(folder, imgsz, seed)
    return checkpoint, export_onnx(checkpoint, "tiny-yolov8n", imgsz, dynamic=True, simplify=True)


# (width, height, format): portrait, landscape, square, tiny, thin, 4K; JPEG and PNG.
SIZES = [
    (640, 480, "JPEG"), (480, 640, "JPEG"), (1920, 1080, "JPEG"), (1080, 1920, "JPEG"), (3840, 2160, "JPEG"),
    (2160, 3840, "PNG"), (160, 160, "PNG"), (17, 23, "PNG"), (23, 17, "JPEG"), (4, 300, "PNG"), (300, 4, "JPEG"),
    (810, 1080, "JPEG"), (1280, 720, "PNG"), (333, 777, "JPEG"), (777, 333, "PNG"), (100, 90, "JPEG"),
    (161, 159, "PNG"), (96, 320, "JPEG"), (512, 512, "JPEG"), (1000, 10, "PNG"), (64, 48, "JPEG"),
    (250, 1500, "JPEG"), (1500, 250, "PNG"), (999, 555, "JPEG"), (555, 999, "PNG"),
]


def detection_images(count: int, seed: int = 0) -> list[tuple[str, bytes]]:
    """``count`` encoded images of varied sizes (cycling SIZES): crops of the shipped photos, resized, with
    random rectangles, so the detector sees edges and textures at every scale. (name, bytes) each."""
    import cv2

    rng = np.random.default_rng(seed)
    photos = calibration_images()[:2]
    images = []
    for index in range(count):
        width, height, fmt = SIZES[index % len(SIZES)]
        photo = photos[index % 2]
        top, left = int(rng.integers(0, photo.shape[0] // 3)), int(rng.integers(0, photo.shape[1] // 3))
        crop = photo[top:, left:]
        image = cv2.resize(crop, (width, height), interpolation=cv2.INTER_AREA if width < crop.shape[1] else cv2.INTER_CUBIC)
        for _ in range(3):
            x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
            colour = tuple(int(c) for c in rng.integers(0, 256, 3))
            cv2.rectangle(image, (x, y), (x + int(rng.integers(1, width // 3 + 2)), y + int(rng.integers(1, height // 3 + 2))), colour, -1)
        ok, data = cv2.imencode(".jpg" if fmt == "JPEG" else ".png", image, [cv2.IMWRITE_JPEG_QUALITY, 90] if fmt == "JPEG" else [])
        assert ok
        images.append((f"{index:02d}-{width}x{height}.{fmt.lower()}", data.tobytes()))
    return images


def shared_tiny_detector(base: Path) -> tuple[Path, Path]:
    """One tiny detector per test session (``base``: pytest's basetemp): exporting it takes ~20 s."""
    folder = base / "tiny-detector"
    checkpoint, onnx_path = folder / "tiny-yolov8n.pt", folder / "tiny-yolov8n.onnx"
    if checkpoint.is_file() and onnx_path.is_file():
        offline_ultralytics(folder / "ultralytics-config")
        return checkpoint, onnx_path
    return build_tiny_detector(folder)
