"""Which TensorRT each Triton container release ships: a plan deserializes only in the TensorRT that built it.

Source: NVIDIA's Triton release notes and the Deep Learning Frameworks Support Matrix (the ``py3``
container, not ``trtllm-python-py3``, which ships its own TensorRT). Versions are written to the precision
we could confirm; comparisons use only the components written here, so an entry written as "10.11"
never flags a 10.11.0 plan. There was no 25.07 Triton release. Releases missing from the table are
reported as unknown (a warning), never guessed.
"""

from __future__ import annotations

import re

from repo_builder.errors import UserError

# Triton container release -> TensorRT version in that container.
TRITON_TENSORRT: dict[str, str] = {
    "23.01": "8.5.2",
    "23.02": "8.5.3",
    "23.03": "8.5.3",
    "23.04": "8.6.1",
    "23.05": "8.6.1",
    "23.06": "8.6.1",
    "23.07": "8.6.1",
    "23.08": "8.6.1",
    "23.09": "8.6.1",
    "23.10": "8.6.1",
    "23.11": "8.6.1",
    "23.12": "8.6.1",
    "24.01": "8.6.1",
    "24.02": "8.6.3",
    "24.03": "8.6.3",
    "24.04": "8.6.3",
    "24.05": "10.0.1",
    "24.06": "10.1.0",
    "24.07": "10.2.0",
    "24.08": "10.3.0",
    "24.09": "10.4.0",
    "24.10": "10.5.0",
    "24.11": "10.6.0",
    "24.12": "10.7.0",
    "25.01": "10.8.0",
    "25.02": "10.8.0",
    "25.03": "10.9.0",
    "25.04": "10.9.0",
    "25.05": "10.10.0",
    "25.06": "10.11.0",
    "25.08": "10.13",
    "25.09": "10.13",
    "25.10": "10.13",
}

_RELEASE = re.compile(r"^(\d{2})\.(\d{2})$")


def normalize_release(release: str) -> str:
    """'24.08', '24.8', 'r24.08' or '24.08-py3' -> '24.08'; anything else is a UserError."""
    text = release.strip().lower().removeprefix("r")
    text = re.sub(r"-.*$", "", text)
    m = re.match(r"^(\d{2})\.(\d{1,2})$", text)
    if not m:
        raise UserError(f"--triton-release '{release}' is not a release like 24.08")
    return f"{m.group(1)}.{int(m.group(2)):02d}"


def tensorrt_for_release(release: str) -> str | None:
    """The TensorRT version of a Triton release, or None when the table does not know it."""
    return TRITON_TENSORRT.get(normalize_release(release))


def version_parts(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.strip().split("."):
        m = re.match(r"^\d+", piece)
        if not m:
            break
        parts.append(int(m.group(0)))
    return tuple(parts)


def same_tensorrt(plan_version: str, release_version: str) -> bool:
    """Equal on every component both spell out, up to major.minor.patch (build numbers do not matter)."""
    a, b = version_parts(plan_version)[:3], version_parts(release_version)[:3]
    n = min(len(a), len(b))
    return n > 0 and a[:n] == b[:n]


def releases_for_tensorrt(version: str) -> tuple[str, ...]:
    """Triton releases whose TensorRT matches ``version`` (for hints)."""
    return tuple(r for r, v in TRITON_TENSORRT.items() if same_tensorrt(version, v))
