"""analysis/backends.py: the backend table, each entry as its backend's source has it."""

from __future__ import annotations

import pytest

from repo_builder.validate.analysis.backends import BACKENDS, IoFill, backend_info, fills_io


def test_backend_info_lists_dali_fallback_after_its_default() -> None:
    assert BACKENDS["dali"].model_files == ("model.dali", "dali.py")


@pytest.mark.parametrize(
    ("backend", "platform", "fills"),
    [
        ("onnxruntime", "", True),  # when none declared
        ("tensorrt", "", True),
        ("tensorflow", "tensorflow_savedmodel", True),
        ("tensorflow", "tensorflow_graphdef", False),
        ("pytorch", "", False),
        ("python", "", False),  # only through auto_complete_config: asked per model
        ("unknown_backend", "", False),
    ],
)
def test_fills_io_follows_each_backends_source(backend: str, platform: str, fills: bool) -> None:
    assert fills_io(backend, platform) is fills


def test_backend_info_knows_tensorrt_runs_on_gpus_only() -> None:
    assert backend_info("tensorrt").gpu_only and not backend_info("onnxruntime").gpu_only


def test_backend_info_fills_onnx_io_only_when_none_declared() -> None:
    assert backend_info("onnxruntime").io_fill == IoFill.WHEN_NONE_DECLARED


def test_backend_info_cites_a_source_for_every_entry() -> None:
    assert all(info.source and "src/" in info.source for info in BACKENDS.values())


def test_backend_info_fills_openvino_io_only_when_none_declared() -> None:
    # openvino_backend src/openvino.cc AutoCompleteInputOrOutput: `if (curr_num_ios == 0)`.
    info = backend_info("openvino")
    assert info.io_fill == IoFill.WHEN_NONE_DECLARED and info.fills_batching_always


def test_backend_info_knows_openvino_runs_on_cpus_only() -> None:
    assert backend_info("openvino").cpu_only and not backend_info("python").cpu_only
