"""text-recognizer end to end on the embedded Triton, judged by RapidOCR() in process (issue 37).

One repository is built with --from-rapidocr and served once for the module; the family's reference check
renders 42 images with DejaVu Sans (several lines, 180 and a few degrees rotated, light on dark, no text, 97 to
4000 px wide; mostly small and square, as they cost the detector least) and compares every line: the same count
and strings, boxes within 1 px, scores within 1e-3.

Hostile requests (issue 40) go to the same server: to the pipeline as built, and to TIGHT, a copy of its Python step
with small limits (MAX_REQUEST_BYTES, STEP_MEMORY_BUDGET edited in its model.py, as its README says a user may) whose
dynamic batcher waits 1 s, so that requests sent together meet in one execution.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.step_repository import import_step, server_peak_rss, zeros_png
from support.triton_stats import served_counts

from repo_builder.cli.main import main
from repo_builder.pipelines import ocr_reference
from repo_builder.pipelines.family import ReferenceRun
from repo_builder.pipelines.reference import built_ensemble, called_models, served_copy

pytest.importorskip("rapidocr_onnxruntime", reason="needs-rapidocr: the reference is RapidOCR (test extra)")
pytestmark = [pytest.mark.triton, pytest.mark.slow]
NAME = "ocr"
TIGHT = "ocr_tight"  # the step alone (IMAGE -> LINES), with the limits below
TIGHT_REQUEST_BYTES = 200_000
QUEUE_DELAY_US = 1_000_000  # long enough that a loaded CI machine still gets the concurrent requests into one execution
FAST = 3.0  # seconds: a refusal, never a decode of the bomb
PEAK_RSS = 3 * 2**30  # any server process: decoding a 30000 x 30000 image alone takes 2.7 GB or more


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ocr-repo")
    assert main(["build", "text-recognizer", "--from-rapidocr", "--out", str(out), "--name", NAME,
                 "--runtime", "onnxruntime", "--no-gpu", "-q"]) == 0
    return out


def load_step_module(model_py: Path) -> Any:
    return import_step(model_py, "ocr_step_under_test")


def good_image() -> bytes:
    return ocr_reference.render_case(ocr_reference.CYCLE.index("narrow"))


def tight_budget(step: Any, classes: int) -> int:
    """A budget that one request of good_image() fits, with room for small refused ones, but not two of it."""
    data = good_image()
    held = 3 * len(data) + step.MAX_BOXES * step.LINE_BYTES  # its bytes and its answer's lines, kept until the batch is answered
    return step.image_work(*step.header(data), classes) + held + 3 * held // 4


def add_tight_step(folder: Path) -> None:
    """TIGHT: NAME's Python step copied (new files; site-packages linked), one instance, limits and batching edited."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    source, target = folder / f"{NAME}_preprocess", folder / TIGHT
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("site-packages", "__pycache__"))
    for shipped in source.glob("*/site-packages"):
        (target / shipped.parent.name / "site-packages").symlink_to(shipped.resolve())
    config = text_format.Parse((target / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    config.name = TIGHT
    config.dynamic_batching.max_queue_delay_microseconds = QUEUE_DELAY_US
    del config.dynamic_batching.preferred_batch_size[:]
    for group in config.instance_group:
        group.count = 1
    (target / "config.pbtxt").write_text(text_format.MessageToString(config))
    model_py = next(target.glob("*/model.py"))
    step = load_step_module(model_py)
    classes = len(json.loads(next(target.glob(f"*/{step.CHARACTERS_FILE}")).read_text(encoding="utf-8")))
    source_text = model_py.read_text(encoding="utf-8")
    source_text = re.sub(r"^MAX_REQUEST_BYTES = \d+", f"MAX_REQUEST_BYTES = {TIGHT_REQUEST_BYTES}", source_text, count=1, flags=re.M)
    source_text = re.sub(r"^STEP_MEMORY_BUDGET = \d+", f"STEP_MEMORY_BUDGET = {tight_budget(step, classes)}", source_text, count=1,
                         flags=re.M)
    model_py.write_text(source_text, encoding="utf-8")


@pytest.fixture(scope="module")
def served(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    from repo_builder.triton import start_server

    built = built_ensemble(repo)
    with served_copy(repo, built, None) as staged:
        folder = staged
        if folder == repo:  # not staged: TIGHT goes into a copy, never into the built repository
            folder = tmp_path_factory.mktemp("ocr-served") / "repo"
            shutil.copytree(repo, folder, symlinks=True)
        add_tight_step(folder)
        with start_server(folder, mode="explicit") as server:
            for name in called_models(repo, built):
                server.load(name)
            server.load(NAME)
            server.load(TIGHT)
            yield server, built


def infer(server: Any, inputs: Any) -> Any:
    return server.infer(NAME, inputs, timeout=300.0)


def test_text_recognizer_matches_rapidocr_when_42_rendered_images_sent(served: tuple[Any, Any]) -> None:
    server, built = served
    cases = 42  # three times the kinds' cycle: 97 to 4000 px wide, several lines, 180 and a few degrees, light on dark, no text
    assert {ocr_reference.kind(i) for i in range(cases)} == set(ocr_reference.KINDS)
    report = ocr_reference.check(ReferenceRun(built.model, lambda inputs: infer(server, inputs), 4, cases, built.settings))
    assert report.failures == ()
    assert report.passed and report.cases == cases
    assert report.figures["lines"] >= 90  # the images hold text RapidOCR reads: a comparison, not an empty one
    assert report.figures["max_box_diff_px"] <= 1.0 and report.figures["max_score_diff"] <= 1e-3


def test_text_recognizer_fails_only_the_corrupt_request_when_a_bad_image_sent(served: tuple[Any, Any]) -> None:
    server, _ = served
    empty = ocr_reference.render_case(ocr_reference.CYCLE.index("empty"))
    with pytest.raises(Exception, match="image 1 of this request"):
        infer(server, ocr_reference.request([empty, b"\x89PNG\r\n\x1a\n not really a png"]))
    answer = infer(server, ocr_reference.request([empty, ocr_reference.render_case(ocr_reference.CYCLE.index("narrow"))]))
    lines = [json.loads(row) for row in answer["LINES"].reshape(-1)]
    assert lines[0] == [] and [line["text"] for line in lines[1]] != []


def test_text_recognizer_readme_states_limits_when_built(repo: Path) -> None:
    readme = (repo / NAME / "1" / "README.md").read_text(encoding="utf-8")
    for fact in ("empty list", "1000 contours", "9600 px", "per-request error", "keeps serving"):
        assert fact in readme, fact
    # The limits of issue 40, as the step computes them: its batch bound, its budget, how to raise each.
    step = load_step_module(repo / f"{NAME}_preprocess" / "1" / "model.py")
    flat = " ".join(readme.split())
    assert f"at their widest, {round(step.batch_work(6625) / 2**20)} MiB" in flat
    assert f"within {step.STEP_MEMORY_BUDGET // 2**20} MiB (`STEP_MEMORY_BUDGET`)" in flat
    for fact in ("--max-image-pixels N", "--max-request-bytes N", "--step-memory-mib N", "UNAVAILABLE", "2000 x 1 image"):
        assert fact in flat, fact
    configs = {p.parent.name: p.read_text(encoding="utf-8") for p in repo.glob("*/config.pbtxt")}
    assert set(configs) == {NAME, f"{NAME}_preprocess", f"{NAME}_model", f"{NAME}_cls_model", f"{NAME}_rec_model"}
    assert all('platform: "onnxruntime_onnx"' in configs[f"{NAME}_{role}"] for role in ("model", "cls_model", "rec_model"))


def test_text_recognizer_refuses_bad_model_options_when_built(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from repo_builder.export.text_recognizer import rapidocr_models

    models = rapidocr_models()
    dictionary = tmp_path / "keys.txt"
    dictionary.write_text("a\nb\n", encoding="utf-8")
    cases = [
        (["--from-rapidocr", "--det-model", str(models.det)], "drop --det-model"),
        (["--det-model", str(tmp_path / "none.onnx"), "--rec-model", str(models.rec)], "no such file"),
        (["--det-model", str(models.rec), "--rec-model", str(models.rec)], "--det-model"),
        (["--det-model", str(models.det), "--rec-model", str(models.rec), "--dict", str(dictionary)], "outputs 6625 classes"),
    ]
    for arguments, expected in cases:
        out = tmp_path / "repo"
        target = [] if "tensorrt" in arguments else ["--no-gpu"]  # --defer-compile builds for a GPU server
        code = main(["build", "text-recognizer", *arguments, "--out", str(out), *target, "-q"])
        err = capsys.readouterr().err
        assert code != 0 and expected in err and "Traceback" not in err, (arguments, err)
        assert not out.exists(), arguments


def outcome(server: Any, name: str, images: list[bytes]) -> dict[str, Any] | Exception:
    from tritonclient.utils import InferenceServerException

    from repo_builder.triton.client import connect, infer_model

    try:
        return infer_model(connect(server.grpc_url), name, ocr_reference.request(images), timeout=300.0)
    except InferenceServerException as exc:
        return exc


def together(server: Any, requests: list[list[bytes]]) -> list[dict[str, Any] | Exception]:
    """Every request to TIGHT at once; asserts they were served in fewer executions than requests (batched)."""
    before = served_counts(server.grpc_url, TIGHT, settle=0.5)
    with ThreadPoolExecutor(len(requests)) as pool:
        results = list(pool.map(lambda images: outcome(server, TIGHT, images), requests))
    after = served_counts(server.grpc_url, TIGHT, at_least=before[0] + len(requests))
    assert after[0] - before[0] == len(requests) and after[1] - before[1] < len(requests), (before, after)
    return results


def thin_image() -> bytes:
    """2000 x 1 grey: 2000 pixels that RapidOCR's sizes turn into a 60000 x 15000 letterbox (900 megapixels)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("L", (2000, 1), 255).save(buffer, "PNG")
    return buffer.getvalue()


def refused_fast(server: Any, name: str, images: list[bytes]) -> str:
    start = time.perf_counter()
    result = outcome(server, name, images)
    assert isinstance(result, Exception), result
    assert time.perf_counter() - start < FAST, time.perf_counter() - start
    return str(result)


def test_text_recognizer_refuses_bombs_and_exploding_sizes_before_decoding_when_built_with_defaults(served: tuple[Any, Any]) -> None:
    from repo_builder.render.context import DEFAULT_MAX_IMAGE_PIXELS

    server, _ = served
    empty = ocr_reference.render_case(ocr_reference.CYCLE.index("empty"))
    before = outcome(server, NAME, [good_image()])
    bomb = zeros_png(30000, 30000)  # 0.9 MB declaring 900 megapixels: over twice the limit, Pillow's own check first
    assert len(bomb) < 2**20
    message = refused_fast(server, NAME, [empty, bomb])
    assert f"IMAGE: image 1 of this request: image of more than {2 * DEFAULT_MAX_IMAGE_PIXELS} pixels is over this step's " \
           f"limit of {DEFAULT_MAX_IMAGE_PIXELS} pixels" in message and "--max-image-pixels" in message, message
    message = refused_fast(server, NAME, [zeros_png(10000, 9000)])  # just over the limit: Pillow only warns, ours refuses
    assert "image 0 of this request: image of 10000x9000 = 90000000 pixels is over this step's limit" in message, message
    assert "refused before decoding" in message
    message = refused_fast(server, NAME, [thin_image()])
    assert "IMAGE: this request may take up to" in message and "over its memory budget of 2048 MiB per instance" in message, message
    assert "busy" not in message and "--step-memory-mib" in message
    assert {m.name: m.state for m in server.models() if m.name.startswith(NAME)} == dict.fromkeys(
        [NAME, f"{NAME}_preprocess", f"{NAME}_model", f"{NAME}_cls_model", f"{NAME}_rec_model", TIGHT], "READY")
    assert server_peak_rss(server) < PEAK_RSS
    after = outcome(server, NAME, [good_image()])
    assert isinstance(before, dict) and isinstance(after, dict) and np.array_equal(after["LINES"], before["LINES"])


def test_text_recognizer_answers_busy_with_unavailable_when_concurrent_requests_would_pass_the_budget(served: tuple[Any, Any]) -> None:
    server, _ = served
    alone = outcome(server, TIGHT, [good_image()])
    assert isinstance(alone, dict) and json.loads(alone["LINES"].reshape(-1)[0])  # it reads text
    results = together(server, [[good_image()]] * 4)
    answered = [r for r in results if isinstance(r, dict)]
    busy = [r for r in results if isinstance(r, Exception)]
    assert len(answered) == 1 and len(busy) == 3, results
    assert np.array_equal(answered[0]["LINES"], alone["LINES"])
    for error in busy:
        assert "IMAGE: busy: this step's instance is already working on" in str(error) and "send it again" in str(error), error
        assert error.status() == "StatusCode.UNAVAILABLE", error.status()
    again = outcome(server, TIGHT, [good_image()])
    assert isinstance(again, dict) and np.array_equal(again["LINES"], alone["LINES"])


def test_text_recognizer_fails_each_bad_request_alone_when_batched_with_a_good_one(served: tuple[Any, Any]) -> None:
    server, _ = served
    alone = outcome(server, TIGHT, [good_image()])
    assert isinstance(alone, dict)
    bad = {
        "bomb": ([zeros_png(10000, 9000)], "IMAGE: image 0 of this request: image of 10000x9000 = 90000000 pixels is over"),
        "bytes": ([b"\0" * 250_000], f"IMAGE: this request's inputs are 250000 bytes, over this step's limit of {TIGHT_REQUEST_BYTES}"),
        "thin": ([thin_image()], "IMAGE: this request may take up to"),
        "corrupt": ([b"\x89PNG\r\n\x1a\n not really a png"], "IMAGE: image 0 of this request"),
    }
    results = together(server, [[good_image()], *(images for images, _ in bad.values())])
    good = results.pop(0)
    assert isinstance(good, dict) and np.array_equal(good["LINES"], alone["LINES"]), good
    for (name, (_, rule)), result in zip(bad.items(), results, strict=True):
        assert isinstance(result, Exception) and rule in str(result), (name, result)
        assert "busy" not in str(result), (name, result)


def test_text_recognizer_step_sizes_and_crops_equal_the_stages_own_when_computed_from_the_header(repo: Path) -> None:
    """image_work's sizes are the stages' (fit, letterbox, detector input), and crops cut again per batch (a page over
    CROPS_HELD) are the kept ones, flips included."""
    step = load_step_module(repo / f"{NAME}_preprocess" / "1" / "model.py")
    for height, width in ((480, 640), (30, 97), (29, 2000), (2500, 100), (3000, 2100), (736, 40)):
        fitted, _, _ = step.fit_sides(np.zeros((height, width, 3), dtype=np.uint8))
        assert step.fitted_size(height, width) == fitted.shape[:2], (height, width)
        boxed, top = step.letterbox(fitted)
        assert fitted.shape[0] + 2 * (step.letterbox_top(*fitted.shape[:2]) or 0) == boxed.shape[0] and top >= 0
        det_h, det_w = step.resized_sides(boxed.shape[0], boxed.shape[1], step.det_ratio(*boxed.shape[:2]))
        assert step.det_input(boxed).shape == (1, 3, det_h, det_w), (height, width)
    img = step.decode(ocr_reference.render_case(0))
    rng = np.random.default_rng(3)
    boxes = []
    for _ in range(9):  # quadrilaterals as detect() leaves them: clockwise from top-left, some tall (turned)
        x, y = rng.uniform(0, img.shape[1] - 80), rng.uniform(0, img.shape[0] - 80)
        w, h = rng.uniform(8, 80, 2)
        boxes.append(np.array([[x, y], [x + w, y + 2], [x + w, y + h], [x, y + h - 2]], dtype=np.float32))
    kept = step.Crops(img, boxes)
    held, step.CROPS_HELD = step.CROPS_HELD, 0
    try:
        cut = step.Crops(img, boxes)
    finally:
        step.CROPS_HELD = held
    assert kept.kept is not None and cut.kept is None
    for index in (1, 4, 7):
        kept.flip(index)
        cut.flip(index)
    assert any(h > w for h, w in kept.shapes) and np.array_equal(kept.aspects(), cut.aspects())
    for index in range(len(boxes)):
        assert kept[index].shape[:2] == kept.shapes[index] and np.array_equal(kept[index], cut[index]), index


def test_text_recognizer_reads_a_palette_image_as_its_colours_not_its_indices(repo: Path) -> None:
    """RapidOCR's LoadImage reads a palette image's indices as grey, so the same picture saved with a palette reads
    otherwise than its RGB file; the step reads its colours (with alpha where it has transparency)."""
    from PIL import Image

    step = load_step_module(repo / f"{NAME}_preprocess" / "1" / "model.py")

    def png(image: Any) -> bytes:
        buffer = io.BytesIO()
        image.save(buffer, "PNG")
        return buffer.getvalue()

    page = Image.open(io.BytesIO(good_image())).convert("RGB")
    palette = page.convert("P", palette=Image.Palette.ADAPTIVE, colors=16)
    assert np.array_equal(step.decode(png(palette)), step.decode(png(palette.convert("RGB"))))
    palette.info["transparency"] = 0
    assert np.array_equal(step.decode(png(palette)), step.decode(png(palette.convert("RGBA"))))
