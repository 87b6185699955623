"""Absolute paths a config hands the server as written (ONNX Runtime's ``op_library_filename``, the Python
backend's ``EXECUTION_ENV_PATH``), judged as the target's server sees them: never by looking on this machine.

Such a path is opened on the server, inside its image. A path into this machine's copy of the repository,
its home or a virtual environment is the build machine's: no server has it (the server mounts the
repository elsewhere, and downloads an ``s3://`` one into a temporary folder). A path in the image's own
folders (``/opt``, ``/usr``, ``/lib``) may be there: inside the system Python's ``dist-packages`` validate
knows what the target image installs; elsewhere it cannot see, and says so.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from repo_builder.deploy_target import DeployTarget
from repo_builder.validate.analysis.files import regular_file_size
from repo_builder.validate.analysis.image_modules import image_modules
from repo_builder.validate.records import ModelEntry, Severity

IMAGE_PREFIXES = ("/opt/", "/usr/", "/lib/", "/lib64/", "/lib32/")  # folders of the image's own file system
_DIST_PACKAGES = re.compile(r"^/usr(?:/local)?/lib/python3(?:\.(\d+))?/dist-packages/([^/]+)")
_BACKEND_FOLDER = re.compile(r"^/opt/tritonserver/backends/([^/]+)/")
_PYTHON_VERSION = re.compile(r"/python3\.(\d+)/|\.cpython-3(\d+)")


@dataclass(frozen=True)
class PathVerdict:
    severity: Severity
    reason: str  # completes "'<path>' ..." : "is a path on the build machine ..."


def _python_minor(path: str) -> int | None:
    found = _PYTHON_VERSION.search(path)
    return int(found.group(1) or found.group(2)) if found else None


def _mounted_copy(path: str, model: ModelEntry) -> str | None:
    """The mount point when ``path`` names a file of this model by the model's folder name
    (``/models/m/1/lib.so`` for ``m/1/lib.so``), else None."""
    marker = f"/{model.name}/"
    at = path.rfind(marker)
    if at < 0:
        return None
    rest = path[at + len(marker):]
    if not rest or ".." in rest.split("/") or regular_file_size(model.path / rest, model.path) is None:
        return None
    return path[:at] or "/"


def _in_image(path: str, deploy: DeployTarget | None, provides: tuple[str, ...]) -> PathVerdict | None:
    """A path in the image's folders: judged where the image's contents are known, else a warning."""
    image = deploy.image_name if deploy is not None else "the server's image"
    packages = _DIST_PACKAGES.match(path)
    if packages is not None and deploy is not None:
        module = packages.group(2).split(".")[0]
        if module in image_modules(deploy, provides):
            return None
        extra = " or installs with its Dockerfile" if deploy.step_packages == "dockerfile" else ""
        return PathVerdict(Severity.ERROR, f"is in the system Python's packages, but '{module}' is not one {image} has{extra}")
    backend = _BACKEND_FOLDER.match(path)
    if backend is not None and deploy is not None and backend.group(1) not in deploy.image.backends:
        return PathVerdict(Severity.ERROR, f"is in the folder of a backend {image} does not ship ('{backend.group(1)}')")
    if "/site-packages/" in path and deploy is not None:
        return PathVerdict(Severity.ERROR, f"is in a Python environment (site-packages) that {image} does not have: its Python keeps "
                                           f"packages in /usr/local/lib/python{deploy.python}/dist-packages")
    return PathVerdict(Severity.WARNING, f"is in {image}'s own folders, which validate cannot see into: make sure the image has it")


def judge_server_path(path: str, model: ModelEntry, root: Path, deploy: DeployTarget | None,
                      provides: tuple[str, ...] = ()) -> PathVerdict | None:
    """How the server will find the absolute ``path``: None when the target image has it, else why not
    (an error for the build machine's paths, a warning where validate cannot know)."""
    normal = posixpath.normpath(path)
    if Path(normal).is_relative_to(root):
        return PathVerdict(Severity.ERROR, f"is in this machine's copy of the repository ({root}); the server sees the repository "
                                           "at another path (and downloads one from object storage into a temporary folder)")
    minor = _python_minor(normal)
    if deploy is not None and minor is not None and f"3.{minor}" != deploy.python:
        return PathVerdict(Severity.ERROR, f"was made for Python 3.{minor}; {deploy.image_name} has Python {deploy.python}")
    if normal.startswith(IMAGE_PREFIXES):
        return _in_image(normal, deploy, provides)
    mount = _mounted_copy(normal, model)
    if mount is not None:
        return PathVerdict(Severity.WARNING, f"names this model's own file under {mount}: it loads only on a server that mounts the "
                                             f"repository at {mount} (never one reading it from object storage)")
    return PathVerdict(Severity.ERROR, "is a path on the build machine (or one no server has): the server opens it in its own "
                                       "file system, where it does not exist")
