"""What NVIDIA's stock ``nvcr.io/nvidia/tritonserver:<release>-py3`` image gives a model: one row per release.

A Python-backend step runs on the image's own system Python; the model step runs on one of the image's
backends; a TensorRT plan must match the image's TensorRT. Every value names its source, as the TensorRT
table's rows do (``tensorrt_releases.py``). A release that cannot be sourced is left out and refused with the
list of known ones, never guessed.

What the system Python holds comes from the server repo's ``build.py`` (production stage) on the release
branch: ``wheel``, ``setuptools`` and ``numpy`` always, ``virtualenv`` from 24.04, ``numpy<2`` from 24.06.
From 24.11 the published image also installs its own ``tritonserver`` and ``tritonfrontend`` wheels with
their ``[all]`` extras (cupy, pytest, pydantic), and from 24.12 the OpenAI frontend's requirements (fastapi,
httpx, openai, starlette). pip brings the listed distributions' own dependencies too; only virtualenv's are
listed. Still nothing a preprocessing step usually imports: no PIL, tokenizers, OpenCV or onnxruntime.
"""

from __future__ import annotations

from dataclasses import dataclass

from repo_builder.errors import UserError
from repo_builder.tensorrt_releases import NO_RELEASE, TRITON_TENSORRT, normalize_release

IMAGE = "nvcr.io/nvidia/tritonserver:{release}-py3"

Packages = tuple[tuple[str, str], ...]

# What build.py's Python-backend step installs from 24.06 on; a row's ``packages`` is the whole truth.
IMAGE_PACKAGES: Packages = (("numpy", "<2"), ("wheel", ""), ("setuptools", ""), ("virtualenv", ""))

# virtualenv's own install requirements come along with it.
_VIRTUALENV: Packages = (("virtualenv", ""), ("distlib", ""), ("filelock", ""), ("platformdirs", ""))
# numpy 1.26.4 (2024-02-05) is the last 1.x release and 2.0.0 came out 2024-06-16: an unpinned numpy in an
# image built between those dates, and any numpy<2 since, resolves to 1.26.4.
_NUMPY_1 = ("numpy", "==1.26.4")

_BACKENDS = ("dali", "fil", "identity", "onnxruntime", "openvino", "python", "pytorch", "repeat", "square", "tensorflow", "tensorrt")
_BACKENDS_NO_TF = tuple(b for b in _BACKENDS if b != "tensorflow")
_BACKENDS_NO_ORT = tuple(b for b in _BACKENDS if b != "onnxruntime")
_DALI_PATH = "/opt/tritonserver/backends/dali/wheel/dali"  # build.py sets PYTHONPATH to it from 24.05


@dataclass(frozen=True)
class ImageRow:
    """One release's stock py3 image, each value with its source."""

    release: str  # "24.12"
    python: str  # "3.12": the Python the Python backend's stub embeds
    ubuntu: str  # "24.04"
    glibc: str  # "2.39": the newest manylinux tag a shipped wheel may carry
    python_source: str
    packages: Packages  # (distribution, specifier) pip put into the system Python: a step can import them
    packages_source: str
    backends: tuple[str, ...]  # folder names under /opt/tritonserver/backends
    backends_source: str
    tensorrt: str
    tensorrt_source: str
    # Importable but built from the release's own source, so not to be fetched by name from a registry.
    local_wheels: tuple[str, ...] = ()
    python_path: tuple[str, ...] = ()  # folders the image puts on PYTHONPATH (sourced in packages_source)

    @property
    def image(self) -> str:
        return IMAGE.format(release=self.release)

    def numpy_specifier(self) -> str:
        return dict(self.packages).get("numpy", "")


@dataclass(frozen=True)
class _Era:
    """What build.py's production stage installs, for a run of releases that share it."""

    packages: Packages
    source: str  # "{r}" stands for the release
    local_wheels: tuple[str, ...] = ()


_PIP = "server build.py r{r}, production stage: "
_ERA_2401 = _Era(
    (("numpy", "<2"), ("wheel", ""), ("setuptools", "")),
    _PIP + "pip3 install --upgrade wheel setuptools, then numpy unpinned (built before numpy 2.0.0: 1.26.3 or 1.26.4)",
)
_ERA_2402 = _Era(
    (_NUMPY_1, ("wheel", ""), ("setuptools", "")),
    _PIP + "pip3 install --upgrade wheel setuptools, then numpy unpinned (built between numpy 1.26.4 and 2.0.0)",
)
_ERA_2404 = _Era(
    (_NUMPY_1, ("wheel", ""), ("setuptools", ""), *_VIRTUALENV),
    _PIP + "pip3 install --upgrade wheel setuptools numpy virtualenv (numpy unpinned, built between 1.26.4 and 2.0.0)",
)
_ERA_2406 = _Era(
    (_NUMPY_1, ("wheel", ""), ("setuptools", ""), *_VIRTUALENV),
    _PIP + 'pip3 install --upgrade wheel setuptools "numpy<2" virtualenv',
)


def _frontend_era(cupy: str, pydantic: str = "", openai: str = "", partial_json: bool = False) -> _Era:
    """From 24.11: wheel and setuptools are Ubuntu's apt packages, and the image's own tritonserver and
    tritonfrontend wheels come with their [all] extras (core python/setup.py or pyproject.toml, server
    src/python/setup.py); from 24.12 also the OpenAI frontend's requirements (``openai`` is its pin)."""
    packages: Packages = (_NUMPY_1, ("wheel", ""), ("setuptools", ""), *_VIRTUALENV, ("pytest", ""), (cupy, ""), ("pydantic", pydantic))
    source = _PIP + (
        f'apt python3-wheel python3-setuptools; pip3 "numpy<2" virtualenv; tritonserver[all] (numpy<2, {cupy}, '
        f"pytest), tritonfrontend[all] (pydantic{pydantic})"
    )
    if openai:
        extra = (("partial-json-parser", ""),) if partial_json else ()
        packages += (("fastapi", "==0.115.6"), ("httpx", "==0.27.2"), ("openai", openai), *extra, ("starlette", ">=0.40.0"))
        source += "; pip3 install -r python/openai/requirements.txt"
    return _Era(packages, source, ("tritonserver", "tritonfrontend"))


_ERA_2411 = _frontend_era("cupy-cuda12x")
_ERA_2412 = _frontend_era("cupy-cuda12x", openai="==1.40.6")
_ERA_2502 = _frontend_era("cupy-cuda12x", openai="==1.60.0")
_ERA_2503 = _frontend_era("cupy-cuda12x", "==2.10.6", "==1.60.0")
_ERA_2505 = _frontend_era("cupy-cuda12x", "==2.10.6", "==1.60.0", partial_json=True)
_ERA_2509 = _frontend_era("cupy-cuda13x", "==2.10.6", "==1.107.3", partial_json=True)

# Ubuntu and its Python, as (Ubuntu, source): NVIDIA's release notes where they could be read, else the
# release branch itself.
_NOTES_2404 = ("24.04", "release notes rel-{d} (server docs/introduction/release_notes.md, r{r}): 'Ubuntu 24.04 including Python 3.12'")
_BRANCH_2404 = (
    "24.04",
    "server r{r}: build.py installs DCGM from the ubuntu2404 CUDA repo (since PR #7783, 24.11) and "
    "qa/L0_backend_python/env/test.sh names 3.12 the container's default Python",
)
_BRANCH_2204 = (
    "22.04",
    "server r{r}: build.py installs DCGM from the ubuntu2204 CUDA repo and "
    "qa/L0_backend_python/env/test.sh names 3.10 the container's default Python",
)
_UBUNTU = {"22.04": ("3.10", "2.35"), "24.04": ("3.12", "2.39")}  # each Ubuntu's python3 and glibc

_ENABLE_ALL = "server build.py r{r}, enable_all(): the Linux backends of --enable-all (ensemble lives in core)"
_NO_ORT = "; GitHub release v2.43.0, Known Issues: ONNX Runtime backend not included with 24.02"
_NO_TF = "; TensorFlow dropped from that list by PR #8113 (PR #8068: deprecated as of 25.03)"


def _row(release: str, base: tuple[str, str], era: _Era, backends: tuple[str, ...], backends_note: str = "") -> ImageRow:
    ubuntu, ubuntu_source = base
    python, glibc = _UBUNTU[ubuntu]
    tensorrt, tensorrt_source = TRITON_TENSORRT[release]
    fill = {"r": release, "d": release.replace(".", "-")}
    dali = release >= "24.05" and "dali" in backends
    return ImageRow(
        release=release,
        python=python,
        ubuntu=ubuntu,
        glibc=glibc,
        python_source=ubuntu_source.format(**fill) + f"; Ubuntu {ubuntu}'s glibc is {glibc}",
        packages=era.packages,
        packages_source=era.source.format(**fill) + ("; ENV PYTHONPATH=" + _DALI_PATH if dali else ""),
        backends=backends,
        backends_source=_ENABLE_ALL.format(**fill) + backends_note,
        tensorrt=tensorrt,
        tensorrt_source=tensorrt_source,
        local_wheels=era.local_wheels,
        python_path=(_DALI_PATH,) if dali else (),
    )


IMAGES: dict[str, ImageRow] = {
    row.release: row
    for row in (
        _row("24.01", _BRANCH_2204, _ERA_2401, _BACKENDS),
        _row("24.02", _BRANCH_2204, _ERA_2402, _BACKENDS_NO_ORT, _NO_ORT),
        _row("24.03", _BRANCH_2204, _ERA_2402, _BACKENDS),
        _row("24.04", _BRANCH_2204, _ERA_2404, _BACKENDS),
        _row("24.05", _BRANCH_2204, _ERA_2404, _BACKENDS),
        _row("24.06", _BRANCH_2204, _ERA_2406, _BACKENDS),
        _row("24.07", _BRANCH_2204, _ERA_2406, _BACKENDS),
        _row("24.08", _BRANCH_2204, _ERA_2406, _BACKENDS),
        _row("24.09", _BRANCH_2204, _ERA_2406, _BACKENDS),
        _row("24.10", _BRANCH_2204, _ERA_2406, _BACKENDS),
        _row("24.11", _BRANCH_2404, _ERA_2411, _BACKENDS),
        _row("24.12", _NOTES_2404, _ERA_2412, _BACKENDS),
        _row("25.01", _NOTES_2404, _ERA_2412, _BACKENDS),
        _row("25.02", _BRANCH_2404, _ERA_2502, _BACKENDS),
        _row("25.03", _BRANCH_2404, _ERA_2503, _BACKENDS_NO_TF, _NO_TF),
        _row("25.04", _BRANCH_2404, _ERA_2503, _BACKENDS_NO_TF, _NO_TF),
        _row("25.05", _BRANCH_2404, _ERA_2505, _BACKENDS_NO_TF, _NO_TF),
        _row("25.06", _BRANCH_2404, _ERA_2505, _BACKENDS_NO_TF, _NO_TF),
        _row("25.08", _BRANCH_2404, _ERA_2505, _BACKENDS_NO_TF, _NO_TF),
        _row("25.09", _BRANCH_2404, _ERA_2509, _BACKENDS_NO_TF, _NO_TF),
        _row("25.10", _BRANCH_2404, _ERA_2509, _BACKENDS_NO_TF, _NO_TF),
    )
}


def known_images() -> str:
    """'24.01, 24.02, ...' for messages."""
    return ", ".join(sorted(IMAGES))


def newest_release() -> str:
    return max(IMAGES)


def image_row(release: str) -> ImageRow:
    """The row of ``release`` ('24.12', 'r24.12', '24.12-py3'); a release the table does not hold is a
    usage error naming the known ones."""
    name = normalize_release(release)
    if name in NO_RELEASE:
        raise UserError(f"--triton-release {name}: NVIDIA published no Triton py3 container that month (known: {known_images()})")
    row = IMAGES.get(name)
    if row is None:
        raise UserError(
            f"--triton-release {name}: what its stock image holds (Python, packages, backends) is not in "
            f"repo-builder's image table (known: {known_images()}); choose one of those"
        )
    return row


# The modules each image package brings, with the dependencies pip or apt installs along: virtualenv needs
# distlib, filelock and platformdirs; Ubuntu's python3-wheel needs python3-packaging; setuptools adds
# pkg_resources and its distutils shim. A package missing here is taken to provide its own name.
_DISTRIBUTION_MODULES = {
    "numpy": ("numpy",),
    "wheel": ("wheel", "packaging"),
    "setuptools": ("setuptools", "pkg_resources", "_distutils_hack", "distutils"),
    "virtualenv": ("virtualenv", "distlib", "filelock", "platformdirs"),
    "cupy-cuda12x": ("cupy", "cupyx", "cupy_backends"),
    "cupy-cuda13x": ("cupy", "cupyx", "cupy_backends"),
    "pytest": ("pytest", "_pytest", "pluggy", "iniconfig"),
    "pydantic": ("pydantic", "pydantic_core", "annotated_types", "typing_extensions"),
    "fastapi": ("fastapi", "starlette", "pydantic", "pydantic_core"),
    "httpx": ("httpx", "httpcore", "anyio", "sniffio", "idna", "certifi", "h11"),
}


def installed_modules(row: ImageRow) -> frozenset[str]:
    """Top-level modules the image's Python can import from its installed distributions (not the stdlib)."""
    names: set[str] = set()
    for distribution in (*(d for d, _ in row.packages), *row.local_wheels):
        key = distribution.lower().replace("_", "-")
        names.update(_DISTRIBUTION_MODULES.get(key, (key.replace("-", "_"),)))
    return frozenset(names)
