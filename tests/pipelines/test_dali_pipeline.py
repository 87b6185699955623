"""The ``--preprocess dali`` graphs (pipelines/dali_preprocess.py): one definition, the device a parameter.

The CPU flavour is serialized, deserialized with DALI's own ``Pipeline.deserialize`` and run on JPEGs made
here, against torchvision's weights transforms and the detector's Python letterbox step; the GPU flavour (what
model.dali holds) cannot run here, so its operators and devices are read from its bytes.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

from repo_builder.errors import UserError
from repo_builder.pipelines.dali_preprocess import (
    ClassifierPlan,
    LetterboxPlan,
    define_classifier,
    define_letterbox,
)
from repo_builder.validate.analysis.dali_pipeline import read_dali_pipeline

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "bench"))
pytest.importorskip("nvidia.dali", reason="needs the dali extra (nvidia-dali-cuda120)")

RESNET_V2 = ClassifierPlan(232, (224, 224), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
# Odd margins on both axes: the crop anchor falls on x.5 and torchvision's round() goes to the even side.
ODD_PLAN = ClassifierPlan(233, (224, 224), (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))


def _run(pipe: object, images: list[bytes]) -> list[np.ndarray]:
    from dali_preprocess import run_pipeline

    return run_pipeline(pipe, images)


def _torchvision(plan: ClassifierPlan, images: list[bytes]) -> np.ndarray:
    import torch
    from PIL import Image
    from torchvision.transforms import v2

    transforms = v2.Compose([v2.PILToTensor(), v2.Resize(plan.resize, antialias=True), v2.CenterCrop(plan.crop),
                             v2.ToDtype(torch.float32, scale=True), v2.Normalize(plan.mean, plan.std)])
    return np.stack([transforms(Image.open(io.BytesIO(d)).convert("RGB")).numpy() for d in images])


def _photos(width: int, height: int, count: int) -> list[bytes]:
    from photos import photo

    return [photo(width, height, seed) for seed in range(count)]


@pytest.mark.parametrize("plan", [RESNET_V2, ODD_PLAN])
@pytest.mark.parametrize("size", [(500, 375), (375, 500), (641, 479)])
def test_dali_classifier_matches_torchvision_within_limits_when_run_on_cpu(plan: ClassifierPlan, size: tuple[int, int]) -> None:
    images = _photos(*size, count=2)
    pipe = define_classifier(plan, "cpu", max_batch_size=2)
    pipe.build()
    (ours,) = _run(pipe, images)
    diff = np.abs(ours - _torchvision(plan, images))
    assert ours.shape == (2, 3, 224, 224)
    assert diff.mean() <= 0.02 and diff.max() <= 0.25, (diff.mean(), diff.max())


def test_dali_classifier_cpu_serialized_pipeline_deserializes_and_gives_the_same_output() -> None:
    from nvidia.dali import Pipeline

    images = _photos(500, 375, 2)
    direct = define_classifier(RESNET_V2, "cpu", max_batch_size=2)
    data = bytes(direct.serialize())
    direct.build()
    restored = Pipeline.deserialize(serialized_pipeline=data, device_id=None, prefetch_queue_depth=1,
                                    exec_async=False, exec_pipelined=False)
    restored.build()
    np.testing.assert_array_equal(_run(direct, images)[0], _run(restored, images)[0])
    ops = read_dali_pipeline(data).op_names
    assert {"ExternalSource", "decoders__Image", "PeekImageShape", "Resize", "Slice", "CropMirrorNormalize"} <= set(ops)


def test_dali_classifier_gpu_flavour_decodes_mixed_and_runs_image_ops_on_gpu() -> None:
    data = bytes(define_classifier(RESNET_V2, "gpu", max_batch_size=8).serialize())
    # The served file is the same bytes wherever it is built: no call stacks with the build machine's paths.
    assert data == bytes(define_classifier(RESNET_V2, "gpu", max_batch_size=8).serialize())
    assert str(ROOT).encode() not in data and b"dali_preprocess.py" not in data
    pipeline = read_dali_pipeline(data)
    devices = {op.name: op.devices for op in pipeline.ops}
    assert devices["decoders__Image"] == ("gpu",)  # fn.decoders.image(device="mixed"): GPU output
    assert devices["Resize"] == devices["Slice"] == devices["CropMirrorNormalize"] == ("gpu",)
    assert pipeline.inputs == ("IMAGE",) and pipeline.output_devices == ("gpu",) and pipeline.batch_size == 8


def test_dali_letterbox_matches_the_python_step_when_run_on_cpu() -> None:
    from dali_preprocess import _detector_step

    step = _detector_step()
    # 1001x1280: the resized width is exactly 500.5, where Python's round() (LetterBox's) goes to 500.
    images = _photos(500, 375, 2) + _photos(375, 500, 1) + _photos(1001, 1280, 1)
    pipe = define_letterbox(LetterboxPlan((640, 640)), "cpu", max_batch_size=4)
    pipe.build()
    ours, shapes = _run(pipe, images)
    model = step.TritonPythonModel()
    model.initialize({})
    try:
        reference, ref_shapes = model.request_tensors([step.decode(data) for data in images])
    finally:
        model.finalize()
    diff = np.abs(ours - reference)
    assert diff.mean() <= 0.02 and diff.max() <= 0.25, (diff.mean(), diff.max())
    # What postprocessing rescales boxes with: original h, w and the letterboxed input's h, w.
    assert shapes.tolist() == ref_shapes.tolist() == [[375, 500, 640, 640]] * 2 + [[500, 375, 640, 640], [1280, 1001, 640, 640]]


def test_dali_classifier_plan_refused_when_interpolation_has_no_dali_equivalent() -> None:
    with pytest.raises(UserError, match="interpolation 'hamming' has no DALI equivalent"):
        ClassifierPlan(256, (224, 224), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5), interpolation="hamming")
