"""What a Python step can import in the target image without shipping anything: the standard library of
the image's Python, the image's few packages (``triton_images.ImageRow.packages``) and the Python backend's
own modules; with ``--step-packages dockerfile`` also what the repository's Dockerfile installs.

The stock py3 image installs ``python3``, ``python3-pip``, ``python3-wheel`` and ``python3-setuptools``
from Ubuntu, then ``numpy<2`` and ``virtualenv`` with pip (server ``build.py``, production stage). Ubuntu
leaves ``tkinter`` and IDLE out of ``python3`` (separate packages the image does not install).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from repo_builder.deploy_target import DeployTarget
from repo_builder.triton_images import installed_modules
from repo_builder.validate.analysis.stdlib_names import stdlib_modules

# pb_stub.cc imports these itself: triton_python_backend_utils.py from /opt/tritonserver/backends/python
# (appended to sys.path), c_python_backend_utils built into the stub.
PYTHON_BACKEND_MODULES = frozenset({"triton_python_backend_utils", "c_python_backend_utils"})
ALWAYS_INSTALLED = frozenset({"pip"})  # apt's python3-pip, in every py3 image with the Python backend
# Standard library names that do not import in the image: other operating systems' modules, and the ones
# Ubuntu splits into packages the image lacks (python3-tk, idle-python3.x).
NOT_IN_IMAGE = frozenset({
    "msvcrt", "nt", "winreg", "winsound", "_winapi", "_overlapped", "_msi", "msilib", "_wmi", "_scproxy",
    "tkinter", "_tkinter", "turtle", "turtledemo", "idlelib",
})
# The distribution pip installs for a module whose name differs (for hints only).
MODULE_DISTRIBUTIONS = {
    "PIL": "pillow", "cv2": "opencv-python-headless", "sklearn": "scikit-learn", "skimage": "scikit-image",
    "yaml": "pyyaml", "bs4": "beautifulsoup4", "google": "protobuf", "attr": "attrs", "dateutil": "python-dateutil",
    "jwt": "pyjwt", "Crypto": "pycryptodome", "fitz": "pymupdf", "docx": "python-docx", "dotenv": "python-dotenv",
}


@lru_cache(maxsize=64)
def image_modules(target: DeployTarget, provides: tuple[str, ...] = ()) -> frozenset[str]:
    """Top-level modules a step imports in ``target``'s image; ``provides``: the modules the repository's
    Dockerfile installs into it (``repo-builder.json`` ``target.image_provides``)."""
    names = set(stdlib_modules(target.python) - NOT_IN_IMAGE)
    names |= PYTHON_BACKEND_MODULES | ALWAYS_INSTALLED
    names |= installed_modules(target.image)  # the image's packages with what they bring along
    names.update(provides)
    return frozenset(names)


def distribution_for(module: str) -> str:
    """The distribution ``pip install`` needs for ``module`` (its own name unless known to differ)."""
    return MODULE_DISTRIBUTIONS.get(module, module)


def module_names(modules: Iterable[str]) -> tuple[str, ...]:
    """Top-level module names as a sorted tuple (the hashable form ``image_modules`` caches on)."""
    return tuple(sorted({m.split(".")[0] for m in modules if m}))
