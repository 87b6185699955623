"""Exactness of the ``--preprocess dali`` pipelines, run on the CPU here, against each family's reference.

- resnet50 (IMAGENET1K_V2: shorter side 232, bilinear, antialias; crop 224) and image-classifier (resnet18's
  IMAGENET1K_V1: 256 / 224) against torchvision's own weights transforms on PIL-decoded images;
- object-detector against the generated Python step's own letterbox (templates/model/detection_preprocess.py.j2:
  OpenCV decode, INTER_LINEAR resize, pad 114, /255), square imgsz (as a static ONNX).

The DALI pipeline measured is the one ``build`` serializes, with ``device="cpu"`` (libjpeg-turbo decode, CPU
resize) instead of ``"gpu"`` (nvJPEG/nvImageCodec decode, GPU resize): on a GPU the decoder differs (nvJPEG's
IDCT and chroma upsampling may move pixels by one level), which this machine cannot measure.

    python scripts/bench/dali_preprocess.py [--quick] [--json]

``measure(quick)`` is what scripts/bench/pipeline.py calls: figures in normalised units (the model's input).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from accuracy import load_step
from photos import SIZES, photos

# The limits the Python steps are held to today (tests/scripts/test_perf_preprocess_accuracy.py).
MEAN_LIMIT = 0.02
MAX_LIMIT = 0.25
CLASSIFIERS = {"resnet50": "ResNet50_Weights.IMAGENET1K_V2", "image-classifier": "ResNet18_Weights.IMAGENET1K_V1"}
DETECTOR_IMGSZ = 640


def _weights(name: str) -> Any:
    import torchvision  # the export extra; imported where used

    enum_name, member = name.split(".")
    return getattr(getattr(torchvision.models, enum_name), member)


def classifier_plan_from(transforms: Any) -> Any:
    """The plan ``build`` derives from the export's metadata, here from the same torchvision transforms."""
    from repo_builder.pipelines.dali_preprocess import ClassifierPlan

    crop = int(transforms.crop_size[0])
    mean, std = [float(v) for v in transforms.mean], [float(v) for v in transforms.std]
    return ClassifierPlan(int(transforms.resize_size[0]), (crop, crop), (mean[0], mean[1], mean[2]), (std[0], std[1], std[2]),
                          str(transforms.interpolation.value))


def run_pipeline(pipe: Any, images: list[bytes]) -> list[np.ndarray]:
    """One batch through a built DALI pipeline: every output as a numpy batch."""
    pipe.feed_input("IMAGE", [np.frombuffer(data, dtype=np.uint8) for data in images])
    return [np.stack([np.array(sample) for sample in out]) for out in pipe.run()]


def _figures(diff: np.ndarray) -> dict[str, float]:
    return {"mean_abs": float(diff.mean()), "max_abs": float(diff.max())}


def classifier_figures(family: str, sizes: list[str], count: int) -> dict[str, Any]:
    from PIL import Image

    from repo_builder.pipelines.dali_preprocess import define_classifier

    transforms = _weights(CLASSIFIERS[family]).transforms()
    plan = classifier_plan_from(transforms)
    pipe = define_classifier(plan, "cpu", max_batch_size=count)
    pipe.build()
    per_size = {}
    for size in sizes:
        images = photos(size, count, seed=7)
        ours, _ = run_pipeline(pipe, images)  # the pixels; then each image's header (h, w)
        reference = np.stack([transforms(Image.open(io.BytesIO(data)).convert("RGB")).numpy() for data in images])
        per_size[size] = _figures(np.abs(ours - reference))
    return {"reference": f"torchvision {CLASSIFIERS[family]}.transforms() (resize {plan.resize}, {plan.interpolation}, "
                         f"antialias; crop {plan.crop[0]})", "sizes": per_size}


def _detector_step() -> Any:
    """The Python step ``build object-detector`` writes, rendered from its template and loaded as the backend would."""
    from repo_builder.render.context import DEFAULT_MAX_IMAGE_PIXELS
    from repo_builder.render.environment import make_environment
    from repo_builder.render.render import render_source

    context = {"model_name": "m_model", "input_name": "IMAGE", "output_name": "images", "shapes_name": "IMAGE_SHAPES",
               "imgsz_name": "IMGSZ", "output_dtype": "float32", "imgsz": [DETECTOR_IMGSZ, DETECTOR_IMGSZ], "stride": 32, "rect": False, "max_image_pixels": DEFAULT_MAX_IMAGE_PIXELS}
    source = render_source(make_environment(None), "model/detection_preprocess.py.j2", context)
    with tempfile.TemporaryDirectory(prefix="dali-bench-") as folder:
        path = Path(folder) / "model.py"
        path.write_text(source, encoding="utf-8")
        return load_step(path, "detection_step_under_test")


def detector_figures(sizes: list[str], count: int) -> dict[str, Any]:
    from repo_builder.pipelines.dali_preprocess import LetterboxPlan, define_letterbox

    step = _detector_step()
    model = step.TritonPythonModel()
    model.initialize({})
    pipe = define_letterbox(LetterboxPlan((DETECTOR_IMGSZ, DETECTOR_IMGSZ)), "cpu", max_batch_size=count)
    pipe.build()
    per_size: dict[str, Any] = {}
    try:
        for size in sizes:
            images = photos(size, count, seed=7)
            ours, shapes = run_pipeline(pipe, images)
            # The step's own per-request letterbox: the tensor and the shapes postprocessing reads.
            reference, ref_shapes = model.request_tensors([step.decode(data) for data in images])
            per_size[size] = {**_figures(np.abs(ours - reference)), "shapes_equal": bool(np.array_equal(shapes, ref_shapes))}
    finally:
        model.finalize()
    return {"reference": f"the Python step's letterbox (Ultralytics LetterBox, auto=False, {DETECTOR_IMGSZ}x{DETECTOR_IMGSZ})",
            "sizes": per_size}


def measure(quick: bool = False) -> dict[str, Any]:
    """dali_mean_abs_diff / dali_max_abs_diff: the worst over images, sizes and families; ``families``: the detail."""
    started = time.perf_counter()
    sizes = ["500x375", "1920x1080"] if quick else list(SIZES)
    count = 2 if quick else 6
    families = {family: classifier_figures(family, sizes, count) for family in CLASSIFIERS}
    families["object-detector"] = detector_figures(sizes, count)
    figures = [f for fam in families.values() for f in fam["sizes"].values()]
    worst_mean = max(f["mean_abs"] for f in figures)
    worst_max = max(f["max_abs"] for f in figures)
    shapes_ok = all(f.get("shapes_equal", True) for f in figures)
    return {
        "dali_mean_abs_diff": worst_mean,
        "dali_max_abs_diff": worst_max,
        "dali_within_limits": worst_mean <= MEAN_LIMIT and worst_max <= MAX_LIMIT and shapes_ok,
        "dali_limits": {"mean_abs": MEAN_LIMIT, "max_abs": MAX_LIMIT},
        "dali_device": "cpu (the served model.dali decodes on the GPU: nvJPEG, not measured here)",
        "dali_images_per_size": count,
        "families": families,
        "seconds": round(time.perf_counter() - started, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two sizes, two images each (CI)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = measure(args.quick)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for family, detail in result["families"].items():
            for size, fig in detail["sizes"].items():
                print(f"{family:17s} {size:10s} mean {fig['mean_abs']:.5f}  max {fig['max_abs']:.5f}")
        print(f"worst: mean {result['dali_mean_abs_diff']:.5f} (<= {MEAN_LIMIT}), max {result['dali_max_abs_diff']:.5f} (<= {MAX_LIMIT})")
    return 0 if result["dali_within_limits"] else 1


if __name__ == "__main__":
    sys.exit(main())
