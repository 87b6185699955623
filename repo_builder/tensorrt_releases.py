"""Which TensorRT each Triton container release ships: a plan deserializes only in the TensorRT that built it.

The ``py3`` container is meant (``trtllm-python-py3`` ships its own TensorRT). Each row names its source.
Versions are written to the precision the source gives; comparisons use only the components written, so
"10.11.0" never flags a 10.11.0.33 plan. A release missing from the table is refused as a usage error
listing the known ones; ``--tensorrt-version X.Y.Z`` is the explicit override for anything newer.
NVIDIA's release notes list Triton releases through 26.08, but the py3 container's TensorRT for 25.11 and
later could not be sourced when this table was written (the server repo's compatibility page lists only
the trtllm and vllm containers), so those rows are left out rather than guessed.
"""

from __future__ import annotations

import re

from repo_builder.errors import UserError

_NOTES = "NVIDIA Triton release notes rel-{}.html, 'Contents of the Triton Inference Server container'"
_MATRIX = "NVIDIA Deep Learning Frameworks Support Matrix, Triton column"
_ISSUE13 = "DLFW support matrix as read for repo-builder issue 13 (25.08+ ship >= 10.13.2); patch not re-checked here"

# Triton container release -> (TensorRT version in that container, source).
TRITON_TENSORRT: dict[str, tuple[str, str]] = {
    "23.01": ("8.5.2", _NOTES.format("23-01")),
    "23.02": ("8.5.3", _NOTES.format("23-02")),
    "23.03": ("8.5.3", _NOTES.format("23-03")),
    "23.04": ("8.6.1", _NOTES.format("23-04")),
    "23.05": ("8.6.1", _NOTES.format("23-05")),
    "23.06": ("8.6.1", _NOTES.format("23-06")),
    "23.07": ("8.6.1", _NOTES.format("23-07")),
    "23.08": ("8.6.1", _NOTES.format("23-08")),
    "23.09": ("8.6.1", _NOTES.format("23-09")),
    "23.10": ("8.6.1", _NOTES.format("23-10")),
    "23.11": ("8.6.1", _NOTES.format("23-11")),
    "23.12": ("8.6.1", _NOTES.format("23-12")),
    "24.01": ("8.6.1", _NOTES.format("24-01")),
    "24.02": ("8.6.3", _NOTES.format("24-02")),
    "24.03": ("8.6.3", _NOTES.format("24-03")),
    "24.04": ("8.6.3", _NOTES.format("24-04")),
    "24.05": ("10.0.1", _MATRIX),
    "24.06": ("10.1.0", _MATRIX),
    "24.07": ("10.2.0", _MATRIX),
    "24.08": ("10.3.0", _MATRIX),
    "24.09": ("10.4.0", _MATRIX),
    "24.10": ("10.5.0", _MATRIX),
    "24.11": ("10.6.0", _MATRIX),
    "24.12": ("10.7.0", _MATRIX),
    "25.01": ("10.8.0", _MATRIX),
    "25.02": ("10.8.0", _MATRIX),
    "25.03": ("10.9.0", _MATRIX),
    "25.04": ("10.9.0", _MATRIX),
    "25.05": ("10.10.0", _MATRIX),
    "25.06": ("10.11.0", _MATRIX),
    "25.08": ("10.13.2", _ISSUE13),
    "25.09": ("10.13.2", _ISSUE13),
    "25.10": ("10.13.2", _ISSUE13),
}
# Months with no py3 Triton release: the release-notes index goes from 25.06 to 25.08
# (docs.nvidia.com/deeplearning/triton-inference-server/release-notes); only a trtllm container is 25.07.
NO_RELEASE: frozenset[str] = frozenset({"25.07"})
OLDEST_SUPPORTED_MAJOR = 10  # see compile.plan.check_tensorrt_major: 8.x/9.x builds are refused

_RELEASE = re.compile(r"^(\d{2})\.(\d{1,2})$")
_VERSION = re.compile(r"^\d+\.\d+(\.\d+){0,2}$")


def known_releases() -> str:
    """'23.01 .. 25.10' for messages."""
    keys = sorted(TRITON_TENSORRT)
    return f"{keys[0]} .. {keys[-1]}"


def normalize_release(release: str) -> str:
    """'24.08', '24.8', 'r24.08' or '24.08-py3' -> '24.08'; anything else is a UserError."""
    text = release.strip().lower().removeprefix("r")
    text = re.sub(r"-.*$", "", text)
    m = _RELEASE.match(text)
    if not m or not 1 <= int(m.group(2)) <= 12:
        raise UserError(
            f"--triton-release '{release}' is not a release like 24.08 (known: {known_releases()}); "
            "or give the TensorRT version itself with --tensorrt-version X.Y.Z"
        )
    return f"{m.group(1)}.{int(m.group(2)):02d}"


def tensorrt_for_release(release: str) -> str | None:
    """The TensorRT version of a Triton release, or None when the table does not know it."""
    row = TRITON_TENSORRT.get(normalize_release(release))
    return row[0] if row else None


def expected_tensorrt(triton_release: str | None, tensorrt_version: str | None) -> str | None:
    """The TensorRT version plans must match: ``--tensorrt-version`` wins, else the release's row.

    Malformed values and releases the table does not know are usage errors (exit 2) naming what to do.
    """
    if tensorrt_version is not None:
        if not _VERSION.match(tensorrt_version.strip()):
            raise UserError(f"--tensorrt-version '{tensorrt_version}' is not a version like 10.3.0")
        return tensorrt_version.strip()
    if triton_release is None:
        return None
    release = normalize_release(triton_release)
    if release in NO_RELEASE:
        raise UserError(f"--triton-release {release}: NVIDIA published no Triton py3 container that month (known: {known_releases()})")
    found = tensorrt_for_release(release)
    if found is None:
        raise UserError(
            f"--triton-release {release} is not in the TensorRT version table (known: {known_releases()}); "
            "pass --tensorrt-version X.Y.Z with the TensorRT version that container ships"
        )
    return found


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
    return tuple(r for r, (v, _) in TRITON_TENSORRT.items() if same_tensorrt(version, v))
