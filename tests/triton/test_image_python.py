"""The embedded tritonserver runs Python steps as NVIDIA's stock py3 image does: on the image's Python with
only its packages (numpy<2, wheel, setuptools, virtualenv), so a step that needs more fails here as it would
there, and one that ships its packages in ``<version>/site-packages`` answers. One venv, one stage and one
server are shared by the module. The image venvs live in the user's cache (``$REPO_BUILDER_CACHE``): the
first run on a machine builds them (about 12 s each); building and racing are tested on a numpy-only venv
in a cache of the test's own."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from support.onnx_repo_factory import write_onnx_model
from support.triton_repo_factory import Tensor, write_python_model

from repo_builder.triton.image_python import (
    MARKER,
    ImagePython,
    find_interpreter,
    host_glibc,
    manylinux_platforms,
    pip_target_arguments,
    prepare_image_python,
    standin_packages,
)
from repo_builder.triton.locate import locate_tritonserver, server_environment
from repo_builder.triton.server import TritonServer, start_server
from repo_builder.triton.standin import StagedRepository, StandIn, remove_stage, stage_repository
from repo_builder.triton_images import ImageRow, image_row

IMAGE = image_row("24.12")  # Ubuntu 24.04: Python 3.12
OLD_IMAGE = image_row("24.05")  # Ubuntu 22.04: Python 3.10

pytestmark = pytest.mark.triton

NEEDS_PIL_PY = """
import PIL  # the image's Python has no Pillow: the stub fails to load this model


class TritonPythonModel:
    def execute(self, requests):
        return []
"""

# Puts its own site-packages first, as generated steps do, and reports what it runs on.
SHIPS_PIL_PY = """
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))

import numpy as np
import PIL
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        try:
            import onnxruntime  # the stand-in's copy must not reach a repository step

            ort = onnxruntime.__file__
        except ImportError:
            ort = "absent"
        found = [sys.version, np.__version__, PIL.__file__, sys.prefix, ort]
        data = np.array([s.encode() for s in found], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("FOUND", data)]) for _ in requests]
"""

FOUND = (Tensor("FOUND", "TYPE_STRING", (-1,)),)


def _needs(version: str) -> None:
    if find_interpreter(version) is None:
        pytest.skip(reason=f"no CPython {version} with a shared libpython here (pyenv install {version})")


def _host_platforms() -> tuple[str, ...]:
    glibc = host_glibc()
    assert glibc is not None, "these tests run on a glibc Linux"
    return manylinux_platforms(glibc)


@pytest.fixture(scope="module")
def image312() -> ImagePython:
    """The 24.12 image's Python from the user's cache (made once per machine: about 12 s)."""
    _needs(IMAGE.python)
    made = prepare_image_python(IMAGE)
    assert isinstance(made, ImagePython), made
    return made


@pytest.fixture(scope="module")
def numpy_only(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ImageRow, list[ImagePython | str]]:
    """A cache of our own, filled by two callers racing for one venv (numpy alone: a few seconds)."""
    _needs(IMAGE.python)
    cache = tmp_path_factory.mktemp("cache")
    row = replace(IMAGE, packages=(("numpy", "<2"),))
    results: list[ImagePython | str] = []
    threads = [threading.Thread(target=lambda: results.append(prepare_image_python(row, cache_dir=cache))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    return cache, row, results


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory, image312: ImagePython) -> Iterator[StagedRepository]:
    root = tmp_path_factory.mktemp("image-repo") / "repo"
    write_python_model(root, "needs_pil", inputs=(), outputs=FOUND, model_py=NEEDS_PIL_PY)
    ships = write_python_model(root, "ships_pil", inputs=(), outputs=FOUND, model_py=SHIPS_PIL_PY)
    # Pillow as a repository ships it: the builder's version, a wheel for the image's Python, in 1/site-packages.
    pillow = f"pillow=={metadata.version('pillow')}"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(ships / "1" / "site-packages"),
         *pip_target_arguments(image312.version, _host_platforms()), pillow],
        check=True, capture_output=True, text=True,
    )
    write_onnx_model(root, "scale")
    packages = standin_packages(image312.version)
    assert isinstance(packages, Path), packages
    stage = stage_repository(root, [StandIn("scale")], packages=packages)
    try:
        yield stage
    finally:
        remove_stage(stage)


@pytest.fixture(scope="module")
def image_server(staged: StagedRepository, image312: ImagePython) -> Iterator[TritonServer]:
    with start_server(staged.path, mode="explicit", image_python=image312) as server:
        yield server


def _found(server: TritonServer, model: str) -> list[str]:
    server.load(model)
    return [v.decode() for v in server.infer(model, {})["FOUND"]]


def test_image_server_refuses_a_step_when_it_imports_a_package_the_image_lacks(image_server: TritonServer) -> None:
    # The builder's own venv has Pillow: a server on it would load this model.
    offset = image_server.log_size()
    outcome = image_server.try_load("needs_pil")
    assert not outcome.loaded
    assert "No module named 'PIL'" in image_server.log_text(offset)


def test_image_server_answers_on_the_image_python_when_the_step_ships_its_packages(
    image_server: TritonServer, image312: ImagePython, staged: StagedRepository
) -> None:
    version, numpy_version, pil_file, prefix, ort = _found(image_server, "ships_pil")
    assert version.startswith("3.12.")
    assert numpy_version.startswith("1.26.")
    assert Path(pil_file).is_relative_to(staged.path / "ships_pil" / "1" / "site-packages")
    assert Path(prefix) == image312.prefix
    assert ort == "absent"


def test_standin_answers_on_the_image_python_when_onnxruntime_comes_from_its_packages(
    image_server: TritonServer, staged: StagedRepository
) -> None:
    settings = json.loads((staged.path / "scale" / "1" / "standin.json").read_text(encoding="utf-8"))
    assert Path(settings["packages"]).is_dir()
    image_server.load("scale")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(image_server.infer("scale", {"X": x})["Y"], x * 3)


def test_prepare_image_python_builds_once_when_two_callers_race(
    numpy_only: tuple[Path, ImageRow, list[ImagePython | str]],
) -> None:
    cache, _, (first, second) = numpy_only
    assert isinstance(first, ImagePython), first
    assert first == second
    # One finished entry; no half-made sibling left behind.
    assert [p.name for p in (cache / "image-python").iterdir() if not p.name.endswith(".lock")] == [first.prefix.name]


def test_prepare_image_python_returns_the_cached_venv_when_called_again(
    numpy_only: tuple[Path, ImageRow, list[ImagePython | str]],
) -> None:
    cache, row, (first, _) = numpy_only
    started = time.monotonic()
    again = prepare_image_python(row, cache_dir=cache)
    assert time.monotonic() - started < 2.0
    assert again == first


def test_prepare_image_python_holds_only_the_image_packages_when_made(
    numpy_only: tuple[Path, ImageRow, list[ImagePython | str]],
) -> None:
    _, _, (made, _) = numpy_only
    assert isinstance(made, ImagePython), made
    installed = json.loads((made.prefix / MARKER).read_text(encoding="utf-8"))["installed"]
    assert list(installed) == ["numpy"] and installed["numpy"].startswith("1.26.")
    # The builder's venv has Pillow and onnxruntime; this one must not see them.
    probe = subprocess.run([str(made.python), "-c", "import PIL"], capture_output=True, text=True)
    assert "No module named 'PIL'" in probe.stderr


def test_prepare_image_python_returns_a_reason_when_the_python_is_not_installed(tmp_path: Path) -> None:
    reason = prepare_image_python(replace(IMAGE, python="3.99"), cache_dir=tmp_path)
    assert isinstance(reason, str) and "Python 3.99 is not installed on this machine" in reason
    assert not (tmp_path / "image-python").exists()


def test_locate_tritonserver_takes_stub_libdir_and_prefix_from_the_image_python_when_given(image312: ImagePython) -> None:
    install = locate_tritonserver(None, image312)
    if not install.bundled:
        pytest.skip(reason="a tritonserver on PATH (a container's) runs its own Python")
    assert install.stub is not None and install.stub.parent.name == "3.12"
    assert image312.libdir in install.libraries
    env = server_environment(install, {"PATH": "/usr/bin"})
    assert env["PATH"].split(":")[0] == str(image312.prefix / "bin")
    default = locate_tritonserver(None)
    assert default.python_prefix is None and image312.libdir not in default.libraries
    assert server_environment(default, {"PATH": "/usr/bin"})["PATH"].split(":")[0] == str(Path(sys.exec_prefix) / "bin")


def test_locate_tritonserver_ignores_the_image_python_when_the_server_is_foreign(tmp_path: Path, image312: ImagePython) -> None:
    binary = tmp_path / "opt" / "tritonserver" / "bin" / "tritonserver"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n", encoding="utf-8")
    binary.chmod(0o755)
    install = locate_tritonserver(binary, image312)
    assert not install.bundled and install.stub is None and install.python_prefix is None


def test_image_server_answers_on_python_310_when_the_target_is_an_ubuntu_2204_release(tmp_path: Path) -> None:
    _needs(OLD_IMAGE.python)
    image310 = prepare_image_python(OLD_IMAGE)
    assert isinstance(image310, ImagePython), image310
    root = tmp_path / "repo"
    write_python_model(root, "ships_pil", inputs=(), outputs=FOUND, model_py=SHIPS_PIL_PY.replace("import PIL\n", "PIL = np\n"))
    with start_server(root, mode="explicit", image_python=image310) as server:
        version, numpy_version, *_ = _found(server, "ships_pil")
    assert version.startswith("3.10.") and numpy_version.startswith("1.26.")
