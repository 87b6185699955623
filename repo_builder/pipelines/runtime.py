"""Which runtime runs the model step: tensorrt, onnxruntime or python, and why."""

from __future__ import annotations

from dataclasses import dataclass

from repo_builder.compile.trtexec import find_trtexec
from repo_builder.errors import UserError
from repo_builder.gpu import missing_gpu_reason
from repo_builder.plan_format import tensorrt_available

CHOICES = ("auto", "tensorrt", "onnxruntime", "python")


@dataclass(frozen=True)
class RuntimeChoice:
    runtime: str
    reason: str


def choose_runtime(requested: str, *, gpu_problem: str | None, tensorrt_problem: str | None, defer_compile: bool) -> RuntimeChoice:
    """Pure decision. ``gpu_problem``/``tensorrt_problem`` are None when that part is present."""
    if requested not in CHOICES:
        raise UserError(f"--runtime '{requested}': expected one of {', '.join(CHOICES)}")
    if defer_compile and requested not in ("auto", "tensorrt"):
        raise UserError(f"--defer-compile writes TensorRT compile recipes; it cannot be used with --runtime {requested}")
    if requested != "auto":
        return RuntimeChoice(requested, "asked for with --runtime")
    if defer_compile:
        return RuntimeChoice("tensorrt", "--defer-compile: TensorRT plans, compiled later on a GPU machine")
    if gpu_problem is None and tensorrt_problem is None:
        return RuntimeChoice("tensorrt", "a GPU and TensorRT are present")
    missing = gpu_problem or tensorrt_problem
    # The target decides, not this machine: every stock image has the ONNX Runtime backend (the embedded
    # proof here serves it through its stand-in); ONNX Runtime inside the Python backend only when asked for.
    return RuntimeChoice("onnxruntime", f"auto: {missing}; the target image's ONNX Runtime backend runs it")


def probe_runtime(requested: str, *, defer_compile: bool) -> RuntimeChoice:
    """Look at this machine (GPU, TensorRT or trtexec) only when ``auto`` needs it."""
    if requested != "auto" or defer_compile:
        return choose_runtime(requested, gpu_problem=None, tensorrt_problem=None, defer_compile=defer_compile)
    gpu_problem = missing_gpu_reason()
    tensorrt_problem = None
    if gpu_problem is None and not tensorrt_available() and find_trtexec() is None:
        tensorrt_problem = "a GPU is present but neither the TensorRT Python package nor trtexec is"
    return choose_runtime(requested, gpu_problem=gpu_problem, tensorrt_problem=tensorrt_problem, defer_compile=defer_compile)
