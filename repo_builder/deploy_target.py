"""The deploy target: one frozen record of where a repository will run, passed by build, validate and ``--live``.

A target is a Triton release's stock py3 image (``triton_images.py``), whether its server has GPUs, and
its CPU platform. It decides what build writes (the model step's backend, the packages shipped with the
Python steps), what offline validate checks (imports, TensorRT versions) and what ``--live`` proves
against (the image's Python, with only the image's packages). The machine that builds decides nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from repo_builder.errors import UserError
from repo_builder.triton_images import ImageRow, image_row, newest_release

PLATFORMS = ("x86_64", "aarch64")
# How Python steps get the packages the image lacks: shipped inside the repository (built for the image's
# Python and platform), or installed into an image the user builds from the Dockerfile build writes.
STEP_PACKAGES = ("ship", "dockerfile")
_OLDEST_MANYLINUX_GLIBC = 5  # manylinux1 is glibc 2.5
NEWEST_NUMPY_1 = "1.26.4"
# Too large to ship inside a repository (and to install for a --live proof here): an image built from the
# Dockerfile carries them.
TOO_LARGE_TO_SHIP = {"torch": "about 700 MB and more", "torchvision": "it needs torch",
                     "nvidia-dali-cuda120": "DALI runs on its own backend"}  # the last numpy 1.x release (February 2024)


@dataclass(frozen=True)
class DeployTarget:
    release: str  # "24.12"
    gpu: bool  # the server has GPUs
    platform: str  # "x86_64" or "aarch64"
    image: ImageRow
    step_packages: str = "ship"

    @property
    def python(self) -> str:
        """The image's Python, "3.12"."""
        return self.image.python

    @property
    def numpy_version(self) -> str:
        """The image's numpy: build.py asks pip for numpy<2, which resolves to the last 1.x release on
        every Python these images have (an exact pin in the row wins)."""
        spec = self.image.numpy_specifier().strip()
        return spec[2:] if spec.startswith("==") else NEWEST_NUMPY_1

    @property
    def image_name(self) -> str:
        return self.image.image

    def pip_platforms(self) -> tuple[str, ...]:
        """pip's ``--platform`` values a wheel for this image may carry: manylinux up to the image's glibc."""
        major, minor = (int(p) for p in self.image.glibc.split("."))
        tags = [f"manylinux_{major}_{m}_{self.platform}" for m in range(minor, _OLDEST_MANYLINUX_GLIBC - 1, -1)]
        legacy = {"manylinux2014": 17, "manylinux2010": 12, "manylinux1": 5}
        tags += [f"{name}_{self.platform}" for name, m in legacy.items() if m <= minor and (self.platform == "x86_64" or name == "manylinux2014")]
        return tuple(tags)

    def describe(self) -> str:
        """'Triton 24.12 (nvcr.io/nvidia/tritonserver:24.12-py3, Python 3.12, x86_64), GPU server'."""
        server = "GPU server" if self.gpu else "CPU-only server"
        return f"Triton {self.release} ({self.image_name}, Python {self.python}, {self.platform}), {server}"


def resolve_target(
    release: str | None = None, gpu: bool | None = None, platform: str | None = None, step_packages: str = "ship"
) -> DeployTarget:
    """The target of ``--triton-release``/``--gpu``/``--platform``: the newest known release, a GPU server
    and x86_64 unless stated. Unknown values are usage errors naming the known ones."""
    row = image_row(release if release is not None else newest_release())
    chosen = platform or "x86_64"
    if chosen not in PLATFORMS:
        raise UserError(f"--platform '{chosen}': expected one of {', '.join(PLATFORMS)}")
    if step_packages not in STEP_PACKAGES:
        raise UserError(f"--step-packages '{step_packages}': expected one of {', '.join(STEP_PACKAGES)}")
    return DeployTarget(release=row.release, gpu=True if gpu is None else gpu, platform=chosen, image=row, step_packages=step_packages)
