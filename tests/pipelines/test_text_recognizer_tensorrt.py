"""build text-recognizer --runtime tensorrt --defer-compile: three compile recipes whose profiles hold every shape the
Python step sends, tensorrt_plan configs Triton's proto reads, trtexec commands NVIDIA's parser accepts, and the
step's own size functions checked against the profiles (it refuses a detector input the plans do not take).

CPU-only except the last test (pytest.mark.gpu), which compiles the plans and runs the family's reference check.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from compile.test_trtexec_parser import _parse, _parsed_profiles
from google.protobuf import text_format
from support.step_repository import import_step
from tritonclient.grpc import model_config_pb2

from repo_builder.cli.main import main
from repo_builder.compile import read_recipe
from repo_builder.compile.precision import choose_precision, read_onnx_facts
from repo_builder.compile.trtexec import find_trtexec, trtexec_command
from repo_builder.gpu import gpu_present
from repo_builder.plan_format import tensorrt_available
from repo_builder.render.context import DEFAULT_MAX_IMAGE_PIXELS

pytest.importorskip("rapidocr_onnxruntime", reason="needs-rapidocr: --from-rapidocr takes the wheel's models (test extra)")

NAME = "ocr"
BATCH = 8  # --max-batch-size
MODELS = {"det": f"{NAME}_model", "cls": f"{NAME}_cls_model", "rec": f"{NAME}_rec_model"}
# The defaults' sizes: the detector's sides multiples of 32 up to 2944 (736 x width_height_ratio 8 / 2), the
# classifier's 48 x 192 rows, the recognizer 48 px high from 320 px to 48 x --max-crop-aspect 200.
EXPECTED = {
    "det": ((1, 3, 32, 32), (BATCH, 3, 736, 736), (BATCH, 3, 2944, 2944)),  # opt batch: the generic derivation's
    "cls": ((1, 3, 48, 192), (6, 3, 48, 192), (BATCH, 3, 48, 192)),
    "rec": ((1, 3, 48, 320), (6, 3, 48, 320), (BATCH, 3, 48, 9600)),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ocr-trt") / "repo"
    assert main(["build", "text-recognizer", "--from-rapidocr", "--runtime", "tensorrt", "--defer-compile",
                 "--max-batch-size", str(BATCH), "--out", str(out), "--name", NAME, "-q"]) == 0
    return out


@pytest.fixture(scope="module")
def step(repo: Path) -> Any:
    return import_step(repo / f"{NAME}_preprocess" / "1" / "model.py", "ocr_trt_step_under_test")


def profile_of(repo: Path, role: str) -> tuple[tuple[int, ...], ...]:
    recipe = read_recipe(repo / MODELS[role] / "1" / "compile.json")
    (profile,) = recipe.profiles
    (name,) = profile.names()
    r = profile[name]
    return r.min, r.opt, r.max


def test_recipes_hold_the_step_sizes_as_profiles_when_deferred(repo: Path) -> None:
    from repo_builder.export.text_recognizer import rapidocr_models
    from repo_builder.fsutil import sha256_file

    models = rapidocr_models()
    for role, source in (("det", models.det), ("cls", models.cls), ("rec", models.rec)):
        version = repo / MODELS[role] / "1"
        assert sorted(p.name for p in version.iterdir()) == ["compile.json", "model.source.onnx"], role
        assert source is not None and read_recipe(version / "compile.json").onnx_sha256 == sha256_file(source), role
        assert profile_of(repo, role) == EXPECTED[role], role


def test_configs_parse_with_tritons_proto_and_validate_passes_when_plans_pending(repo: Path) -> None:
    for role, model in MODELS.items():
        config = text_format.Parse((repo / model / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
        assert config.platform == "tensorrt_plan" and config.max_batch_size == BATCH, role
        assert config.default_model_filename == "model.plan", role
        (tensor,) = config.input
        expected = {"det": [3, -1, -1], "cls": [3, -1, -1], "rec": [3, -1, -1]}[role]  # H, W dynamic in the ONNX
        assert list(tensor.dims) == expected, role
        assert all(group.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU for group in config.instance_group), role
    assert main(["validate", str(repo), "--allow-pending", "--gpu"]) == 0
    assert main(["validate", str(repo), "--gpu"]) != 0  # pending plans are errors unless allowed


@pytest.mark.parametrize("major", [10, 11])
def test_trtexec_commands_are_accepted_by_nvidias_parser_when_built_from_the_recipes(repo: Path, major: int) -> None:
    for role, model in MODELS.items():
        version = repo / model / "1"
        recipe = read_recipe(version / "compile.json")
        onnx = version / recipe.onnx
        plan = choose_precision(recipe.settings.precision, major, read_onnx_facts(onnx), flags=recipe.settings.precision_flags)
        dynamic = tuple(t.name for t in recipe.signature.inputs if t.dynamic_axes)
        cmd = trtexec_command(onnx, version / "model.plan", recipe.profiles, dynamic, plan, recipe.settings)
        (name,) = recipe.profiles[0].names()
        assert _parsed_profiles(_parse(major, cmd)) == [{name: EXPECTED[role]}], role


def det_shape(step: Any, h: int, w: int) -> tuple[int, int] | None:
    """The detector input's (height, width) for an h x w image, through the step's own size functions."""
    fitted = step.fitted_size(h, w)
    if fitted is None:
        return None
    fh, fw = fitted
    lh = fh + 2 * (step.letterbox_top(fh, fw) or 0)
    dh, dw = step.resized_sides(lh, fw, step.det_ratio(lh, fw))
    return (dh, dw) if dh > 0 and dw > 0 else None


def test_step_never_sends_a_detector_shape_outside_the_profile_when_images_within_the_limits(repo: Path, step: Any) -> None:
    lo, _, hi = profile_of(repo, "det")
    assert step.DET_MAX_SIDE == hi[2] == hi[3]
    sides = (1, 5, 29, 30, 31, 64, 97, 200, 480, 600, 735, 736, 737, 1000, 1500, 1999, 2000, 2001, 2500, 3000, 4000, 6000, 9000)
    sent = refused = 0
    for h, w in itertools.product(sides, sides):
        if h * w > DEFAULT_MAX_IMAGE_PIXELS:
            continue
        shape = det_shape(step, h, w)
        if shape is None:
            continue
        if max(shape) > step.DET_MAX_SIDE:
            with pytest.raises(ValueError, match=f"over the TensorRT profile's {step.DET_MAX_SIDE} px"):
                step.check_det_side(*shape)
            assert max(h, w) > 4 * min(h, w), (h, w, shape)  # the README's promise: up to 4:1 is always served
            refused += 1
            continue
        step.check_det_side(*shape)
        assert all(lo[axis] <= size <= hi[axis] and size % 32 == 0 for axis, size in zip((2, 3), shape, strict=True)), (h, w, shape)
        sent += 1
    assert sent > 100 and refused > 0, (sent, refused)
    # det_input itself refuses (a 200 x 1500 image: 736 x 5520), and sends what the arithmetic says otherwise.
    for h, w in ((200, 1500), (480, 640), (30, 2000)):
        img, _ = step.letterbox(step.fit_sides(np.zeros((h, w, 3), dtype=np.uint8))[0])
        expected = det_shape(step, h, w)
        assert expected is not None
        if max(expected) > step.DET_MAX_SIDE:
            with pytest.raises(ValueError, match="serve it from a build with --runtime onnxruntime"):
                step.det_input(img)
        else:
            assert step.det_input(img).shape == (1, 3, *expected)


def test_step_sends_classifier_and_recognizer_batches_inside_the_profiles_when_crops_of_every_aspect(repo: Path, step: Any) -> None:
    """classify() and recognize() run with their BLS call answered by ONNX Runtime on the built models."""
    import onnxruntime as ort

    sessions = {MODELS[role]: ort.InferenceSession(str(repo / MODELS[role] / "1" / "model.source.onnx"),
                                                   providers=["CPUExecutionProvider"]) for role in ("cls", "rec")}
    sent: dict[str, list[tuple[int, ...]]] = {MODELS["cls"]: [], MODELS["rec"]: []}

    def infer(model: str, input_name: str, output_name: str, batch: np.ndarray) -> np.ndarray:
        sent[model].append(batch.shape)
        return sessions[model].run([output_name], {input_name: batch})[0]

    rng = np.random.default_rng(5)
    img = rng.integers(0, 255, (160, 2700, 3), dtype=np.uint8)
    # Six crops up to aspect 6 (one tall, turned): one batch padded to 320; then aspects 100 and 260 (over
    # --max-crop-aspect 200: squeezed to the profile's end, 9600).
    boxes = [np.array([[4, 4], [4 + w, 4], [4 + w, 4 + h], [4, 4 + h]], dtype=np.float32)
             for h, w in ((20, 10), (10, 10), (10, 50), (10, 30), (10, 20), (10, 60), (10, 1000), (10, 2600))]
    held, step.infer = step.infer, infer
    try:
        crops = step.Crops(img, boxes)
        step.classify(crops, lambda _: None)
        step.recognize(crops, ["blank", *"x" * 6623, " "], lambda _: None)
    finally:
        step.infer = held
    for role in ("cls", "rec"):
        lo, _, hi = profile_of(repo, role)
        shapes = sent[MODELS[role]]
        assert shapes and all(all(a <= s <= b for a, s, b in zip(lo, shape, hi, strict=True)) for shape in shapes), (role, shapes)
    widths = sorted(shape[3] for shape in sent[MODELS["rec"]])
    assert widths == [profile_of(repo, "rec")[0][3], profile_of(repo, "rec")[2][3]], widths  # 320, then 9600 (capped)


_GPU = gpu_present()


@pytest.mark.gpu
@pytest.mark.skipif(not (_GPU and (tensorrt_available() or find_trtexec())),
                    reason="needs an NVIDIA GPU with TensorRT or trtexec" + ("" if _GPU else " (no GPU detected)"))
def test_compiled_plans_match_rapidocr_when_compiled_on_a_gpu(repo: Path, tmp_path: Path) -> None:
    import shutil

    from repo_builder.compile import compile_pending
    from repo_builder.pipelines.reference import check_reference

    built = tmp_path / "repo"
    shutil.copytree(repo, built)
    assert compile_pending(built).pending == 3
    assert main(["validate", str(built), "--gpu"]) == 0
    report = check_reference(built, minimum_cases=40)
    assert report.passed, report.to_json()
