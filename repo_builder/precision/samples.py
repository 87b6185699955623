"""Calibration and accuracy data as clients send it: image files, or a text file of one text per line.

Samples are read lazily (only their digests are kept while listing), so a large folder costs one pass of
hashing, and at most ``limit`` samples are taken. The digest is the content's SHA-256: the two sets must
not share one, so no accuracy figure is measured on data the scales were fitted to.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".gif")
UNITS = ("images", "texts")
MAX_TEXT_FILE = 256 * 1024 * 1024  # a text file of lines larger than this is refused, not read


@dataclass(frozen=True)
class Sample:
    source: str  # where it came from, for messages: a file, or file:line
    digest: str  # sha256 of its content (the image file's bytes, the text's UTF-8)
    read: Callable[[], Any]  # its content as a client sends it: bytes (images) or str (texts)


@dataclass(frozen=True)
class SampleSet:
    option: str  # the flag it came from: --calibration-data, --accuracy-data
    path: Path
    unit: str
    samples: tuple[Sample, ...]
    skipped: int = 0  # past the limit

    def digest(self) -> str:
        """One digest for the whole set (the manifest records it, so a rebuild can tell the data changed)."""
        return hashlib.sha256("".join(s.digest for s in self.samples).encode()).hexdigest()

    def batches(self, size: int) -> Iterator[tuple[Sample, ...]]:
        for start in range(0, len(self.samples), max(1, size)):
            yield self.samples[start:start + size]

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "unit": self.unit, "samples": len(self.samples), "skipped": self.skipped, "sha256": self.digest()}


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _image_files(option: str, path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
                   and not any(part.startswith(".") for part in p.relative_to(path).parts))
    if not files:
        raise UserError(f"{option} {path}: no image files ({', '.join(IMAGE_SUFFIXES)}) in this folder; "
                        "pass a folder of images like those clients send")
    return files


def _image_samples(option: str, path: Path, limit: int) -> tuple[list[Sample], int]:
    files = _image_files(option, path)
    samples = [Sample(str(f), _file_digest(f), functools.partial(f.read_bytes)) for f in files[:limit]]
    return samples, max(0, len(files) - limit)


def _text_samples(option: str, path: Path, limit: int) -> tuple[list[Sample], int]:
    if not path.is_file():
        raise UserError(f"{option} {path}: not a file; pass a UTF-8 text file with one text per line")
    if path.stat().st_size > MAX_TEXT_FILE:
        raise UserError(f"{option} {path}: over {MAX_TEXT_FILE >> 20} MiB; pass fewer texts (a few hundred are enough)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise UserError(f"{option} {path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    texts = [(number, line) for number, line in enumerate(lines, 1) if line.strip()]
    samples = [Sample(f"{path}:{number}", hashlib.sha256(line.encode("utf-8")).hexdigest(), functools.partial(str, line))
               for number, line in texts[:limit]]
    return samples, max(0, len(texts) - limit)


def read_samples(option: str, path: Path, unit: str, limit: int) -> SampleSet:
    """Up to ``limit`` samples from ``path``: a folder of image files (or one), or a text file of lines."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    if limit < 1:
        raise UserError(f"{option}: the sample limit must be >= 1, got {limit}")
    path = Path(path)
    if not path.exists():
        kind = "a folder of image files" if unit == "images" else "a UTF-8 text file with one text per line"
        raise UserError(f"{option} {path}: no such file or folder; pass {kind}")
    try:
        samples, skipped = (_image_samples if unit == "images" else _text_samples)(option, path, limit)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot read it ({exc.strerror or exc})") from None
    if not samples:
        raise UserError(f"{option} {path}: holds no {unit}; pass at least one")
    unique: dict[str, Sample] = {}
    for sample in samples:
        unique.setdefault(sample.digest, sample)  # a duplicate adds nothing to a range or a mean
    return SampleSet(option, path, unit, tuple(unique.values()), skipped)


def check_disjoint(calibration: SampleSet, accuracy: SampleSet) -> None:
    """Refuse accuracy data that shares content with the calibration data (by SHA-256)."""
    seen = {s.digest: s for s in calibration.samples}
    shared = [(seen[s.digest], s) for s in accuracy.samples if s.digest in seen]
    if shared:
        first_cal, first_acc = shared[0]
        raise UserError(
            f"{accuracy.option} {accuracy.path}: {len(shared)} of its {len(accuracy.samples)} {accuracy.unit} are also in "
            f"{calibration.option} (same content: {first_acc.source} = {first_cal.source}); "
            "the accuracy gate must measure on data kept apart from calibration: remove them from one set"
        )


def read_all(samples: Sequence[Sample]) -> list[Any]:
    return [s.read() for s in samples]
