"""Whether a wheel's tags and a compiled module's file name fit the image's Python and platform.

The rules are pip's (``packaging.tags``): CPython 3.12 on x86_64 with glibc 2.39 loads ``cp312-cp312``,
``cp3X-abi3`` for X <= 12, ``py3X-none`` for X <= 12, ``cp312-none`` and ``py3``, on ``any``, ``linux_x86_64``
or ``manylinux_2_Y_x86_64`` for Y <= 39 (``manylinux1``/``2010``/``2014`` are 2.5/2.12/2.17). A compiled
module's suffix says the same in short: ``.cpython-312-x86_64-linux-gnu.so`` loads only in CPython 3.12 on
x86_64 with glibc; ``.abi3.so`` in any CPython the wheel's tag allows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_(\w+)")
_LEGACY = re.compile(r"(manylinux1|manylinux2010|manylinux2014)_(\w+)")
_PYTHON_TAG = re.compile(r"(py|cp)(\d)(\d*)")
_CPYTHON_ABI = re.compile(r"cp(\d)(\d+)([a-z]*)")
# name.cpython-312-x86_64-linux-gnu.so / name.cpython-312-darwin.so / name.cp312-win_amd64.pyd
_EXTENSION = re.compile(r"\.cpython-(\d)(\d+)([a-z]*)-([A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*)\.so$")
_PYPY_EXTENSION = re.compile(r"\.pypy\d*-[\w-]+\.so$")


@dataclass(frozen=True)
class Abi:
    """What the image's Python loads: its version, the CPU platform and the C library's version."""

    python: str  # "3.12"
    platform: str  # "x86_64" | "aarch64"
    glibc: str  # "2.39"

    @property
    def minor(self) -> int:
        return int(self.python.split(".")[1])

    @property
    def glibc_version(self) -> tuple[int, int]:
        major, minor = self.glibc.split(".")[:2]
        return int(major), int(minor)


def _python_problem(interpreter: str, abi: str, target: Abi) -> str | None:
    found = _PYTHON_TAG.fullmatch(interpreter)
    if found is None:
        return f"built for another Python implementation ({interpreter})"
    kind, major, minor_text = found.groups()
    if major != "3":
        return f"built for Python {major}"
    if not minor_text:
        return None if kind == "py" else f"built for an unknown CPython ({interpreter})"
    minor = int(minor_text)
    if abi == "abi3" or (abi == "none" and kind == "py"):
        return None if minor <= target.minor else f"needs Python 3.{minor} or newer"
    if minor != target.minor:
        return f"built for CPython 3.{minor}"
    cpython = _CPYTHON_ABI.fullmatch(abi)
    if abi != "none" and (cpython is None or cpython.group(3) or int(cpython.group(2)) != minor):
        return f"built for the ABI '{abi}'"  # a debug (d) or free-threaded (t) CPython, or another one
    return None


def _platform_problem(platform: str, target: Abi) -> str | None:
    if platform == "any":
        return None
    if platform.startswith(("macosx", "ios")):
        return "built for macOS"
    if platform.startswith("win"):
        return "built for Windows"
    if platform.startswith("musllinux"):
        return "built for musl libc (Alpine Linux); the image's Python uses glibc"
    manylinux = _MANYLINUX.fullmatch(platform)
    legacy = _LEGACY.fullmatch(platform)
    if manylinux is not None:
        glibc, arch = (int(manylinux.group(1)), int(manylinux.group(2))), manylinux.group(3)
    elif legacy is not None:
        glibc, arch = _LEGACY_MANYLINUX[legacy.group(1)], legacy.group(2)
    elif platform.startswith("linux_"):
        glibc, arch = (0, 0), platform.removeprefix("linux_")
    else:
        return f"built for the platform '{platform}'"
    if arch != target.platform:
        return f"built for {arch}, not {target.platform}"
    if glibc > target.glibc_version:
        return f"needs glibc {glibc[0]}.{glibc[1]}, the image has {target.glibc}"
    return None


def tag_problem(tag: str, target: Abi) -> str | None:
    """Why a wheel tag (``cp312-cp312-manylinux_2_17_x86_64``, compressed sets allowed) does not load in
    ``target``, or None when one of its expansions does."""
    parts = tag.strip().split("-")
    if len(parts) != 3:
        return f"'{tag}' is not a wheel tag"
    first: str | None = None
    for interpreter in parts[0].split("."):
        for abi in parts[1].split("."):
            for platform in parts[2].split("."):
                why = _python_problem(interpreter, abi, target) or _platform_problem(platform, target)
                if why is None:
                    return None
                first = first or why
    return first


def extension_problem(filename: str, target: Abi) -> str | None:
    """Why a compiled module (``x.cpython-310-x86_64-linux-gnu.so``, ``x.pyd``) does not load in ``target``;
    None when it does or its name does not say (``x.abi3.so``, ``x.so``)."""
    if filename.endswith(".pyd"):
        return "built for Windows"
    if _PYPY_EXTENSION.search(filename):
        return "built for PyPy"
    found = _EXTENSION.search(filename)
    if found is None:
        return None
    major, minor, flags, triplet = found.groups()
    if major != "3" or int(minor) != target.minor or flags:
        return f"built for CPython {major}.{minor}{flags}"
    if triplet == "darwin":
        return "built for macOS"
    arch, _, system = triplet.partition("-")
    if system.endswith("musl"):
        return "built for musl libc (Alpine Linux)"
    if not system.startswith("linux"):
        return f"built for '{triplet}'"
    if arch != target.platform:
        return f"built for {arch}, not {target.platform}"
    return None


def is_extension(filename: str) -> bool:
    """Whether a file name is a compiled module whose name says what it was built for."""
    return filename.endswith(".pyd") or (filename.endswith(".so") and (".cpython-" in filename or ".pypy" in filename))
