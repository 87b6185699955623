"""`--runtime auto` picks tensorrt only with a GPU and TensorRT, else python, and says why."""

from __future__ import annotations

import pytest

from repo_builder.errors import UserError
from repo_builder.pipelines.runtime import choose_runtime


def test_choose_runtime_picks_tensorrt_when_gpu_and_tensorrt_present() -> None:
    choice = choose_runtime("auto", gpu_problem=None, tensorrt_problem=None, defer_compile=False)
    assert choice.runtime == "tensorrt" and "GPU" in choice.reason


@pytest.mark.parametrize(
    ("gpu", "trt"),
    [("no NVIDIA GPU found", None), (None, "a GPU is present but neither the TensorRT Python package nor trtexec is")],
)
def test_choose_runtime_picks_the_images_onnxruntime_and_says_why_when_something_missing(gpu: str | None, trt: str | None) -> None:
    # The target's image decides (every stock image has the ONNX Runtime backend), not what the embedded
    # Triton here can load: ONNX Runtime inside the Python backend only when asked for (issue 35).
    choice = choose_runtime("auto", gpu_problem=gpu, tensorrt_problem=trt, defer_compile=False)
    assert choice.runtime == "onnxruntime"
    assert (gpu or trt) in choice.reason and "ONNX Runtime backend" in choice.reason


def test_choose_runtime_picks_tensorrt_when_compile_deferred_without_gpu() -> None:
    assert choose_runtime("auto", gpu_problem="no GPU", tensorrt_problem=None, defer_compile=True).runtime == "tensorrt"


def test_choose_runtime_keeps_explicit_choice_when_asked() -> None:
    assert choose_runtime("onnxruntime", gpu_problem="no GPU", tensorrt_problem=None, defer_compile=False).runtime == "onnxruntime"


def test_choose_runtime_raises_user_error_when_defer_compile_without_tensorrt() -> None:
    with pytest.raises(UserError, match="--defer-compile"):
        choose_runtime("onnxruntime", gpu_problem=None, tensorrt_problem=None, defer_compile=True)
