"""`export image-classifier`: any torchvision classifier by name, or a user's file, with one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.export.torchvision_classifier import ModelChoice, parse_model, preprocess_for


def test_parse_model_reads_a_torchvision_name_when_prefixed() -> None:
    assert parse_model("torchvision:mobilenet_v3_small", weights="random") == ModelChoice("mobilenet_v3_small", "random")


def test_parse_model_refuses_weights_when_model_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "m.pt"
    path.write_bytes(b"x")
    with pytest.raises(UserError, match="only with --model torchvision:NAME"):
        parse_model(str(path), weights="random")


def test_parse_model_says_what_to_pass_when_the_file_is_missing(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="torchvision:NAME"):
        parse_model(str(tmp_path / "missing.pt"))


def test_preprocess_is_imagenet_default_when_a_pickled_model_names_no_arch() -> None:
    assert preprocess_for(None) == {"resize": 256, "crop": 224, "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225],
                                    "interpolation": "bilinear", "antialias": True}


def test_export_cli_writes_the_weights_transforms_when_model_is_a_torchvision_name(tmp_path: Path, capsys: Any) -> None:
    code = main(["export", "image-classifier", "--model", "torchvision:mobilenet_v3_small", "--weights", "random",
                 "--out", str(tmp_path / "o"), "--no-parity", "-q"])
    out = capsys.readouterr().out
    assert code == 0
    assert "input  pixel_values: float32 (TYPE_FP32) [batch, 3, 224, 224]" in out
    assert "output logits: float32 (TYPE_FP32) [batch, 1000]" in out


def test_export_cli_refuses_a_state_dict_of_another_arch_in_one_line(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "w.pt"
    torch.save(torch.nn.Linear(3, 2).state_dict(), path)
    code = main(["export", "image-classifier", "--model", "torchvision:resnet18", "--weights", str(path), "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not a resnet18 state_dict" in err
    assert not (tmp_path / "o").exists()


def test_export_cli_refuses_a_file_that_is_no_model_in_one_line(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "m.pt"
    torch.save([1, 2, 3], path)
    code = main(["export", "image-classifier", "--model", str(path), "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not a torch model or state_dict" in err, err


def test_export_cli_explains_offline_when_default_weights_cannot_download(tmp_path: Path) -> None:
    # A proxy on a closed loopback port makes the download fail at once, as offline; nothing is fetched.
    env = {**os.environ, "TORCH_HOME": str(tmp_path / "th"), "https_proxy": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "no_proxy": "", "NO_PROXY": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "repo_builder", "export", "image-classifier", "--model", "torchvision:mobilenet_v3_small",
         "--out", str(tmp_path / "o"), "-q"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "--weights default" in errors[0] and "--weights random" in errors[0] and "mobilenet_v3_small" in errors[0]
