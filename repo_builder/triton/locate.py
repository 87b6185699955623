"""Find a ``tritonserver`` to run and the environment it needs.

Order: ``--tritonserver PATH``, then a ``tritonserver`` on ``PATH`` (a Triton container, which has every
backend), then the one the ``nvidia-pytriton`` wheel ships (Python backend only). The wheel's server needs
three things prepared around it, all measured here:

- its libraries in ``nvidia_pytriton.libs`` and the running Python's ``LIBDIR`` on ``LD_LIBRARY_PATH``
  (without LIBDIR the backend stub picks up another libpython and fails with
  ``'_thread.RLock' object has no attribute '_recursion_count'``);
- the Python-backend stub built for this Python (``python_backend_stubs/<X.Y>/``) placed in a *copy* of
  the backends folder (never written into site-packages);
- numpy < 2 in the environment the stub embeds (with numpy 2 the backend silently receives zeros).

The stub embeds the running interpreter's environment. Its Python runs isolated (environment variables
such as PYTHONPATH are ignored), and finds its prefix, hence the environment's site-packages, from the
``python3`` on ``PATH``: as PyTriton does, the environment's ``bin`` goes first on the server's PATH.

Given an ``ImagePython`` (``image_python.py``), the wheel's server runs steps as the stock image does
instead: that Python's stub, its LIBDIR, and its venv (the image's packages only) first on PATH. A foreign
server has its own Python and ignores it.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from repo_builder.errors import UserError

if TYPE_CHECKING:
    from repo_builder.triton.image_python import ImagePython

STUB_NAME = "triton_python_backend_stub"


@dataclass(frozen=True)
class TritonInstall:
    """A runnable tritonserver and what must be prepared around it."""

    binary: Path
    backends: Path | None  # backends folder to pass (copied first when ``stub`` is set)
    stub: Path | None  # Python-backend stub to place into the copied backends/python folder
    libraries: tuple[Path, ...] = ()  # prepended to LD_LIBRARY_PATH
    caches: Path | None = None
    bundled: bool = False  # the nvidia-pytriton wheel's server (Python backend only)
    python_prefix: Path | None = None  # the environment the stub embeds (bundled only); None: this one


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _pytriton_root() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _bundled_install(root: Path, image_python: ImagePython | None = None) -> TritonInstall:
    dist = root / "tritonserver"
    binary = dist / "bin" / "tritonserver"
    if not binary.is_file():
        raise UserError(
            f"the nvidia-pytriton wheel at {root} has no tritonserver binary ({binary}); "
            "reinstall it with pip install --force-reinstall 'repo-builder[serve]' or pass --tritonserver PATH"
        )
    if image_python is not None:
        return _image_install(root, image_python)
    if not (Path(sys.exec_prefix) / "bin" / "python3").exists():
        raise UserError(
            f"the embedded Triton's Python backend finds this environment through {sys.exec_prefix}/bin/python3, "
            "which does not exist: run repo-builder from a virtual environment (python3 -m venv)"
        )
    stubs = dist / "python_backend_stubs"
    stub = stubs / python_version() / STUB_NAME
    if not stub.is_file():
        have = sorted(p.name for p in stubs.iterdir() if (p / STUB_NAME).is_file()) if stubs.is_dir() else []
        raise UserError(
            f"the nvidia-pytriton wheel has no Python-backend stub for Python {python_version()} "
            f"(it has {', '.join(have) or 'none'}): run repo-builder with one of those Pythons "
            "or pass --tritonserver PATH"
        )
    libraries = [root.parent / "nvidia_pytriton.libs", root / "tritonserver" / "external_libs"]
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir:
        libraries.append(Path(libdir))
    caches = dist / "caches"
    return TritonInstall(
        binary=binary,
        backends=dist / "backends",
        stub=stub,
        libraries=tuple(p for p in libraries if p.is_dir()),
        caches=caches if caches.is_dir() else None,
        bundled=True,
    )


def _image_install(root: Path, image: ImagePython) -> TritonInstall:
    """The wheel's server running steps on the image's Python: its stub, its libpython, its venv."""
    dist = root / "tritonserver"
    stub = dist / "python_backend_stubs" / image.version / STUB_NAME
    if not stub.is_file():
        raise UserError(
            f"the nvidia-pytriton wheel has no Python-backend stub for Python {image.version}, the target "
            "image's Python: pass --tritonserver PATH (a container's server) to prove this target live"
        )
    # The image's LIBDIR, never this Python's: the stub must load the libpython it was built for.
    libraries = [root.parent / "nvidia_pytriton.libs", dist / "external_libs", image.libdir]
    caches = dist / "caches"
    return TritonInstall(
        binary=dist / "bin" / "tritonserver",
        backends=dist / "backends",
        stub=stub,
        libraries=tuple(p for p in libraries if p.is_dir()),
        caches=caches if caches.is_dir() else None,
        bundled=True,
        python_prefix=image.prefix,
    )


def _foreign_install(binary: Path) -> TritonInstall:
    """A server built elsewhere (``/opt/tritonserver/bin/tritonserver`` in a container)."""
    home = binary.resolve().parent.parent
    backends = home / "backends"
    libs = home / "lib"
    caches = home / "caches"
    return TritonInstall(
        binary=binary,
        backends=backends if backends.is_dir() else None,
        stub=None,
        libraries=(libs,) if libs.is_dir() else (),
        caches=caches if caches.is_dir() else None,
    )


def locate_tritonserver(
    explicit: str | os.PathLike[str] | None = None, image_python: ImagePython | None = None
) -> TritonInstall:
    """The server to run: ``explicit`` if given, else ``tritonserver`` on PATH, else nvidia-pytriton's.

    ``image_python`` makes the wheel's server run steps on that Python (ignored by any other server).
    """
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_dir():
            path = path / "bin" / "tritonserver"
        if not path.is_file():
            raise UserError(
                f"--tritonserver {explicit}: no such file; pass the path of a tritonserver binary"
            )
        if not os.access(path, os.X_OK):
            raise UserError(f"--tritonserver {explicit}: not executable (chmod +x it)")
        root = _pytriton_root()
        if root is not None and path.resolve() == (root / "tritonserver" / "bin" / "tritonserver").resolve():
            return _bundled_install(root, image_python)
        return _foreign_install(path)
    on_path = shutil.which("tritonserver")
    if on_path:
        return _foreign_install(Path(on_path))
    root = _pytriton_root()
    if root is None:
        raise UserError(
            "no tritonserver found: install the embedded one with pip install 'repo-builder[serve]', "
            "put tritonserver on PATH, or pass --tritonserver PATH"
        )
    return _bundled_install(root, image_python)


def check_numpy() -> None:
    """The Python backend passes zeros with numpy 2: refuse to start rather than give wrong answers."""
    from importlib import metadata

    try:
        version = metadata.version("numpy")
    except metadata.PackageNotFoundError:
        raise UserError(
            f"the Python backend needs numpy<2 in {sys.prefix}: install it with pip install 'numpy<2'"
        ) from None
    if int(version.split(".")[0]) >= 2:
        raise UserError(
            f"numpy {version} is installed in {sys.prefix}, but the embedded Triton's Python backend "
            "silently receives zeros with numpy 2: install numpy<2 (pip install 'numpy<2')"
        )


def server_environment(install: TritonInstall, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the server process: libraries, and this Python for the Python backend's stub."""
    env = dict(os.environ if base is None else base)
    libs = [str(p) for p in install.libraries]
    if env.get("LD_LIBRARY_PATH"):
        libs.append(env["LD_LIBRARY_PATH"])
    if libs:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libs)
    if not install.bundled:
        return env  # a container's server has its own Python for its stub
    # The stub's embedded Python locates its prefix from the python on PATH (as PyTriton relies on).
    bin_dir = str((install.python_prefix or Path(sys.exec_prefix)) / "bin")
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")]) if env.get("PATH") else bin_dir
    return env


def prepare_backends(install: TritonInstall, workdir: Path) -> Path | None:
    """The backends folder to pass; for the wheel, a copy with this Python's stub in backends/python."""
    if install.stub is None or install.backends is None:
        return install.backends
    target = workdir / "backends"
    shutil.copytree(install.backends, target, ignore=shutil.ignore_patterns("__pycache__"))
    python_dir = target / "python"
    python_dir.mkdir(exist_ok=True)
    shutil.copy2(install.stub, python_dir / STUB_NAME)
    return target
