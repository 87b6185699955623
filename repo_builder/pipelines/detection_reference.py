"""object-detector's reference check and bench reference: Ultralytics' own ``YOLO(model).predict`` on the same
images with the same thresholds (the build's settings), compared per image: the same number of detections,
every box within 1 px, scores within 1e-3, the same classes and names.

Ultralytics (AGPL-3.0, the ``detect`` extra) and OpenCV are imported inside the functions: the check runs
only where the user installed them, never on the core install or in a generated repository.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import require
from repo_builder.pipelines.family import FamilyReference, InProcess, ReferenceReport, ReferenceRun

BOX_PX = 1.0
SCORE = 1e-3
# (width, height): landscape, portrait, square, tiny, thin, 4K; every 5th image is a PNG.
SIZES = ((640, 480), (480, 640), (1920, 1080), (1080, 1920), (3840, 2160), (160, 160), (17, 23), (4, 300), (300, 4),
         (1280, 720), (333, 777), (777, 333), (100, 90), (512, 512), (999, 555), (64, 48), (250, 1500))


def reference_images(count: int, seed: int = 0) -> list[bytes]:
    """``count`` encoded images of varied sizes: smooth colour fields with rectangles and noise (edges at
    every scale, so a detector has candidates), JPEG and PNG."""
    cv2 = require("cv2", "detect", "the object-detector reference images")
    import numpy as np  # with cv2: the serve/detect extras

    rng = np.random.default_rng(seed)
    images = []
    for index in range(count):
        width, height = SIZES[index % len(SIZES)]
        coarse = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
        image = cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC)
        for _ in range(6):
            x, y = int(rng.integers(0, width)), int(rng.integers(0, height))
            size = (int(rng.integers(1, width // 3 + 2)), int(rng.integers(1, height // 3 + 2)))
            cv2.rectangle(image, (x, y), (x + size[0], y + size[1]), tuple(int(c) for c in rng.integers(0, 256, 3)), -1)
        noisy = np.clip(image.astype(np.int16) + rng.integers(-12, 13, image.shape, dtype=np.int16), 0, 255).astype(np.uint8)
        ok, data = cv2.imencode(".png" if index % 5 == 4 else ".jpg", noisy)
        assert ok, "OpenCV could not encode a generated image"
        images.append(data.tobytes())
    return images


def image_request(items: Sequence[bytes]) -> dict[str, Any]:
    import numpy as np  # with the serve extra, where requests are sent

    return {"IMAGE": np.array([[item] for item in items], dtype=np.object_)}


def predict_kwargs(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The build's options (the manifest's settings) as predict's keyword arguments."""
    kwargs: dict[str, Any] = {"verbose": False}
    names = {"imgsz": "imgsz", "conf": "conf", "iou": "iou", "max_det": "max_det", "classes": "classes", "agnostic": "agnostic_nms"}
    for key, argument in names.items():
        if settings.get(key) is not None:
            kwargs[argument] = settings[key]
    return kwargs


def decode(data: bytes) -> Any:
    import cv2  # with the detect extra
    import numpy as np

    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)


def row_problem(outputs: Mapping[str, Any], row: int, result: Any, name: str) -> str | None:
    """None when the ensemble's ``row`` matches ``result`` (an Ultralytics Results) within the bounds, else why."""
    import numpy as np

    count = int(outputs["COUNT"][row][0])
    expected = result.boxes
    if count != len(expected):
        return f"{name}: {count} detections, predict has {len(expected)}"
    if count == 0:
        return None
    boxes = float(np.abs(outputs["BOXES"][row][:count] - expected.xyxy.numpy()).max())
    scores = float(np.abs(outputs["SCORES"][row][:count] - expected.conf.numpy()).max())
    classes = np.asarray(outputs["CLASS_IDS"][row][:count])
    same = np.array_equal(classes, expected.cls.numpy().astype(np.int64))
    if boxes > BOX_PX or scores > SCORE or not same:
        return f"{name}: boxes off by {boxes:.3g} px, scores by {scores:.3g}, same classes: {same}"
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in outputs["CLASS_NAMES"][row][:count]]
    if names != [str(result.names[int(c)]) for c in classes]:
        return f"{name}: class names differ from the model's"
    return None


def load_yolo(model: Path, task: str = "detect") -> Any:
    require("ultralytics", "detect", "the reference check (Ultralytics' predict; AGPL-3.0)")
    from ultralytics import YOLO  # AGPL-3.0, heavy: only here

    return YOLO(str(model), task=task)


def check(run: ReferenceRun) -> ReferenceReport:
    """Half the images one per request (each at its own letterbox, as predict on one image), half in batches
    of up to max_batch_size (one request = one predict call on the same list)."""
    yolo = load_yolo(run.model)
    kwargs = predict_kwargs(run.settings)
    images = reference_images(max(run.minimum_cases, 1))
    failures: list[str] = []
    compared, detections = 0, 0
    for outputs, row, result, name in served_beside_predict(run, yolo, images, kwargs):
        compared += 1
        detections += len(result.boxes)
        problem = row_problem(outputs, row, result, name)
        if problem:
            failures.append(problem)
    return ReferenceReport(
        family="object-detector", cases=compared, passed=not failures and compared == len(images),
        figures={"images": float(compared), "mismatched_images": float(len(failures)), "detections": float(detections)},
        bounds={"mismatched_images": "== 0 (same count, boxes within 1 px, scores within 1e-3, same classes)"},
        failures=tuple(failures[:5]),
    )


def load(model: Path, threads: int) -> InProcess:
    """YOLO(model).predict in this process (ONNX Runtime for an .onnx, PyTorch for a .pt)."""
    yolo = load_yolo(model)

    def run(items: Sequence[bytes]) -> Any:
        return yolo.predict([decode(item) for item in items], verbose=False)

    return InProcess(run=run, threads=threads)


REFERENCE = FamilyReference(check=check, items=reference_images, request=image_request, load=load, unit="images")


def served_beside_predict(run: ReferenceRun, yolo: Any, images: Sequence[bytes],
                          kwargs: Mapping[str, Any]) -> Iterator[tuple[Any, int, Any, str]]:
    """Each image's served answer beside predict's on the same list: (the request's outputs, the image's row in
    them, predict's result, the image's name), requests grouped as ``reference_groups`` says."""
    for group in reference_groups(len(images), run.max_batch_size):
        outputs = run.infer(image_request([images[i] for i in group]))
        results = yolo.predict([decode(images[i]) for i in group], **kwargs)
        for row, (index, result) in enumerate(zip(group, results, strict=True)):
            width, height = SIZES[index % len(SIZES)]
            yield outputs, row, result, f"image {index} ({width}x{height})"


def reference_groups(count: int, max_batch: int) -> list[list[int]]:
    """The images' indices as requests: the first half one image per request, the rest in batches of
    ``max_batch`` (both paths of a step: one image, and a batch)."""
    half = count // 2
    return [[i] for i in range(half)] + [list(range(s, min(s + max_batch, count))) for s in range(half, count, max_batch)]
