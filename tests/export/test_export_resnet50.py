"""ResNet50 export: IO read back from the file, signature.json, labels, parity, reproducibility, weights."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import torch
from support.export_test_helpers import graph_io
from torchvision.models import ResNet50_Weights

from repo_builder.cli.main import main
from repo_builder.export.parity import image_cases, run_parity, torch_reference
from repo_builder.export.resnet50 import export_resnet50, load_resnet50
from repo_builder.spec import OnnxArtifact, read_signature


def test_resnet50_export_has_float32_nchw_input_with_dynamic_batch_when_read_from_the_file(
    resnet_random: OnnxArtifact,
) -> None:
    io = graph_io(resnet_random.onnx_path)
    assert io["inputs"] == {"pixel_values": ("FLOAT", ["batch", 3, 224, 224])}
    assert io["outputs"] == {"logits": ("FLOAT", ["batch", 1000])}
    onnx.checker.check_model(str(resnet_random.onnx_path), full_check=True)
    opsets = {o.domain: o.version for o in onnx.load(str(resnet_random.onnx_path)).opset_import}
    assert opsets[""] == 17


def test_resnet50_signature_matches_the_file_when_read_back(resnet_random: OnnxArtifact) -> None:
    signature = read_signature(resnet_random.signature_path)
    assert signature == resnet_random.signature
    (pixel,) = signature.inputs
    (logits,) = signature.outputs
    assert (pixel.name, pixel.dtype, pixel.onnx_type, pixel.triton_type) == (
        "pixel_values",
        "float32",
        "FLOAT",
        "TYPE_FP32",
    )
    assert pixel.shape == ("batch", 3, 224, 224) and logits.shape == ("batch", 1000)
    assert signature.batch_axis == 0
    meta = signature.metadata
    assert meta["task"] == "image-classification"
    assert meta["opset"] == 17 and meta["torch"] == torch.__version__.split("+")[0]
    assert meta["onnx"] == onnx.__version__
    assert "dynamo=False" in meta["exporter"]["name"] and meta["exporter"]["why"]
    assert meta["source"]["weights"] == "random"
    assert meta["onnx_sha256"] == hashlib.sha256(resnet_random.onnx_path.read_bytes()).hexdigest()
    assert meta["labels_file"] == "labels.txt"
    transforms = ResNet50_Weights.IMAGENET1K_V2.transforms()
    assert meta["preprocess"] == {
        **meta["preprocess"],
        "resize": 232,
        "crop": 224,
        "mean": list(transforms.mean),
        "std": list(transforms.std),
        "interpolation": "bilinear",
        "layout": "NCHW",
    }


def test_resnet50_labels_are_torchvision_categories_when_exported(resnet_random: OnnxArtifact) -> None:
    lines = (resnet_random.onnx_path.parent / "labels.txt").read_text(encoding="utf-8").splitlines()
    assert lines == list(ResNet50_Weights.IMAGENET1K_V2.meta["categories"])
    assert resnet_random.labels == tuple(lines) and lines[0] == "tench"


def test_resnet50_parity_passes_at_every_batch_size_when_checked(resnet_random: OnnxArtifact) -> None:
    parity = resnet_random.signature.parity
    assert [p.shapes["pixel_values"] for p in parity] == [
        (1, 3, 224, 224),
        (4, 3, 224, 224),
        (8, 3, 224, 224),
    ]
    assert all(p.passed and p.max_abs_error < 1e-3 and p.max_rel_error <= 1e-4 for p in parity)
    assert all(p.max_abs_error > 0 for p in parity)  # a real comparison, not an empty one


def test_resnet50_export_is_byte_identical_when_repeated(resnet_random: OnnxArtifact, tmp_path: Path) -> None:
    again = export_resnet50(tmp_path / "again", weights="random", check_parity=False)
    assert again.onnx_path.read_bytes() == resnet_random.onnx_path.read_bytes()
    assert again.signature.parity == ()


def test_resnet50_height_and_width_are_dynamic_when_dynamic_hw(tmp_path: Path) -> None:
    artifact = export_resnet50(tmp_path / "hw", weights="random", dynamic_hw=True, check_parity=False)
    io = graph_io(artifact.onnx_path)
    assert io["inputs"]["pixel_values"] == ("FLOAT", ["batch", 3, "height", "width"])
    assert artifact.signature.inputs[0].shape == ("batch", 3, "height", "width")
    model, _ = load_resnet50("random")
    cases = image_cases("pixel_values", (2,), [(160, 200)])
    (result,) = run_parity(artifact.onnx_path, torch_reference(model, ["pixel_values"]), cases)
    assert result.passed and result.shapes["pixel_values"] == (2, 3, 160, 200)


def test_resnet50_loads_a_checkpoint_with_ten_classes_when_weights_is_a_path(tmp_path: Path) -> None:
    from torchvision.models import resnet50

    torch.manual_seed(3)
    state = {f"module.{k}": v for k, v in resnet50(num_classes=10).state_dict().items()}
    path = tmp_path / "finetuned.pt"
    torch.save({"epoch": 3, "state_dict": state}, path)
    artifact = export_resnet50(tmp_path / "out", weights=str(path), check_parity=False)
    assert graph_io(artifact.onnx_path)["outputs"] == {"logits": ("FLOAT", ["batch", 10])}
    assert artifact.labels == tuple(f"class_{i}" for i in range(10))
    assert artifact.signature.metadata["source_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    model, _ = load_resnet50(str(path))
    (result,) = run_parity(
        artifact.onnx_path,
        torch_reference(model, ["pixel_values"]),
        image_cases("pixel_values", (1,), [(224, 224)]),
    )
    assert result.passed


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such file"),
        (b"not a checkpoint", "not a readable state_dict"),
        ("state_dict_of_another_model", "not a ResNet50 state_dict"),
    ],
)
def test_export_cli_gives_one_line_error_when_weights_path_is_bad(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | str | None, expected: str
) -> None:
    path = tmp_path / "weights.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        torch.save(torch.nn.Linear(3, 2).state_dict(), path)
    code, err = _run_cli(
        ["export", "resnet50", "--weights", str(path), "--out", str(tmp_path / "out"), "-q"], capsys
    )
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: --weights") and expected in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_export_cli_explains_offline_when_imagenet_weights_cannot_download(tmp_path: Path) -> None:
    # A proxy on a closed loopback port makes the download fail at once, as offline; nothing is fetched.
    env = {
        **os.environ,
        "TORCH_HOME": str(tmp_path / "torch-home"),
        "https_proxy": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "no_proxy": "",
        "NO_PROXY": "",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "repo_builder", "export", "resnet50", "--out", str(tmp_path / "out"), "-q"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2, proc.stderr
    assert len(errors) == 1 and "Traceback" not in proc.stderr
    assert "--weights imagenet" in errors[0] and "--weights random" in errors[0]
    assert "resnet50-11ad3fa6.pth" in errors[0]
    assert not (tmp_path / "out").exists()
