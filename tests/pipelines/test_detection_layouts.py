"""Every detection layout Ultralytics 8.4 writes, built, served and judged by ``YOLO(onnx).predict`` (the
reference check): one-to-many heads simplified or not, dynamic or static; YOLO26's end-to-end head
(nms=False), dynamic without onnxslim and static; an nms=True export. Unknown layouts are refused in one line.

The models are yolov8n and yolo26n from their yaml files (random weights, recalibrated: support/detection_fixtures),
exported here at imgsz 160; one repository holds every variant.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.detection_fixtures import IMGSZ, build_tiny_checkpoint, export_onnx, shared_tiny_detector

from repo_builder.cli.main import main

pytest.importorskip("ultralytics", reason="needs-ultralytics: the variants are exported with Ultralytics (detect extra)")

# name -> (model, Ultralytics' export options, the head the build must read)
VARIANTS = {
    "v8-noslim": ("yolov8n", {"dynamic": True, "simplify": False}, "one-to-many"),
    "v8-static": ("yolov8n", {"simplify": True}, "one-to-many"),
    "v8-nms": ("yolov8n", {"dynamic": True, "nms": True}, "end-to-end"),
    "y26-default": ("yolo26n", {"dynamic": True}, "one-to-many"),
    "y26-e2e-noslim": ("yolo26n", {"dynamic": True, "nms": False, "simplify": False}, "end-to-end"),
    "y26-e2e-static": ("yolo26n", {"nms": False}, "end-to-end"),
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.getbasetemp()
    checkpoints = {"yolov8n": shared_tiny_detector(base)[0],
                   "yolo26n": build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-yolo26n"), yaml="yolo26n.yaml")}
    return {name: export_onnx(checkpoints[model], name, IMGSZ, **options) for name, (model, options, _) in VARIANTS.items()}


@pytest.fixture(scope="module")
def repository(exports: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("layouts-repo")
    for name, onnx_path in exports.items():
        args = ["--imgsz", str(IMGSZ)] if "static" not in name else []  # a static export has its own size
        assert main(["build", "object-detector", "--from-onnx", str(onnx_path), *args, "--name", name.replace("-", "_"),
                     "--runtime", "python", "--max-batch-size", "4", "--out", str(repo), "-q"]) == 0, name
    return repo


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_object_detector_reads_the_head_from_the_graph_when_the_export_varies(repository: Path, name: str) -> None:
    ensemble = name.replace("-", "_")
    post = (repository / f"{ensemble}_postprocess" / "1" / "model.py").read_text()
    head = VARIANTS[name][2]
    assert f"END_TO_END = {head == 'end-to-end'}" in post
    config = (repository / ensemble / "config.pbtxt").read_text()
    served_batch = 1 if "static" in name or "nms" in name else 4  # a static or nms=True graph takes one image
    assert f"max_batch_size: {served_batch}" in config


# CI serves one variant of each kind (unsimplified one-to-many, static, end-to-end found by the probe run); the
# full mode serves all six (each is read and built above in CI too).
SERVED_IN_CI = ("v8-noslim", "v8-static", "y26-e2e-noslim")
_QUICK = "the served variants " + ", ".join(SERVED_IN_CI) + " and every variant's head and batch checks"


@pytest.mark.triton
@pytest.mark.slow
@pytest.mark.parametrize("name", [n if n in SERVED_IN_CI else pytest.param(n, marks=pytest.mark.full_only(_QUICK))
                                  for n in sorted(VARIANTS)])
def test_object_detector_matches_predict_when_ultralytics_exports_this_layout(repository: Path, name: str) -> None:
    from repo_builder.pipelines.reference import check_reference

    report = check_reference(repository, ensemble=name.replace("-", "_"), minimum_cases=8)
    assert report.failures == () and report.passed, report.failures
    assert report.cases == 8
    if name != "y26-e2e-static":  # random YOLO26 weights find nothing on some generated images: not on all
        assert report.figures["detections"] > 8


def test_object_detector_refuses_an_unknown_layout_with_the_shape_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(  # an image in, a [batch, 7, 9] out: neither [4 + classes, anchors] ... nor [K, 6]
        [helper.make_node("Constant", [], ["out"], value=helper.make_tensor("v", TensorProto.FLOAT, [1, 3, 9], [0.0] * 27))],
        "g", [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "height", "width"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 3, 9])])
    path = tmp_path / "odd.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    assert main(["build", "object-detector", "--from-onnx", str(path), "--out", str(tmp_path / "repo")]) == 2
    err = capsys.readouterr().err
    assert "output 'out' is [1, 3, 9]" in err and "[batch, K, 6]" in err and "Traceback" not in err


def test_object_detector_refuses_iou_when_the_head_is_end_to_end(exports: dict[str, Path], tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", "object-detector", "--from-onnx", str(exports["y26-e2e-noslim"]), "--iou", "0.5",
                 "--out", str(tmp_path / "repo")]) == 2
    assert "an end-to-end head (no NMS in the pipeline, as predict runs it); drop --iou" in capsys.readouterr().err
    assert not (tmp_path / "repo").exists() or not any((tmp_path / "repo").iterdir())
