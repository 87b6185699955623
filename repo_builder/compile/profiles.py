"""Optimization profiles from the signature: the shapes Triton may send, and nothing the engine cannot run.

Batch axis: 1 / max_batch_size / max_batch_size (opt at the maximum because Triton's dynamic batcher fills
batches under load, which is when speed matters). Sequence-like symbolic axes: 1 / min(128, max) /
``max_seq_len``, which defaults to the longest sequence the signature says preprocessing emits
(``metadata.preprocess.max_length``, written by the text export). An axis the export gave a range
(``metadata.axis_ranges``: name -> [min, opt, max], e.g. a detector's letterboxed height and width) takes it.
Any other symbolic axis (an image's height, say) has no safe default: the user names it with ``--profile``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from repo_builder.compile_recipe import CompileSettings
from repo_builder.errors import UserError
from repo_builder.spec import Profile, ShapeRange, Signature, TensorSpec

# Axis names export writes for token / time dimensions; these follow --max-seq-len.
_SEQUENCE_AXIS = re.compile(r"seq|len|token|time|step|position", re.IGNORECASE)
TYPICAL_SEQ_LEN = 128  # opt for sequence axes: padded requests cluster at short lengths


def is_sequence_axis(name: str) -> bool:
    return bool(_SEQUENCE_AXIS.search(name))


def signature_max_seq_len(signature: Signature) -> int | None:
    """The longest token sequence the exported pipeline sends, when export recorded it."""
    meta = signature.metadata
    for value in ((meta.get("preprocess") or {}).get("max_length"), meta.get("max_length"), meta.get("max_seq_len")):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    return None


def signature_axis_ranges(signature: Signature) -> dict[str, tuple[int, int, int]]:
    """Ranges export recorded for named symbolic axes (``metadata.axis_ranges``: name -> [min, opt, max]),
    e.g. a detector's letterboxed height/width: from the stride up to --imgsz."""
    found = signature.metadata.get("axis_ranges")
    ranges: dict[str, tuple[int, int, int]] = {}
    for name, value in (found.items() if isinstance(found, dict) else ()):
        if isinstance(value, list) and len(value) == 3 and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            lo, mid, hi = value
            if 1 <= lo <= mid <= hi:
                ranges[str(name)] = (lo, mid, hi)
    return ranges


def _default_range(
    tensor: TensorSpec, batch_axis: int | None, settings: CompileSettings, ranges: dict[str, tuple[int, int, int]] | None = None
) -> ShapeRange:
    lo: list[int] = []
    mid: list[int] = []
    hi: list[int] = []
    for axis, dim in enumerate(tensor.shape):
        if axis == batch_axis:
            top = max(1, settings.max_batch_size)
            lo.append(1)
            mid.append(top)
            hi.append(top)
        elif isinstance(dim, int):
            lo.append(dim)
            mid.append(dim)
            hi.append(dim)
        elif dim in (ranges or {}):
            for bound, value in zip((lo, mid, hi), (ranges or {})[dim], strict=True):
                bound.append(value)
        elif is_sequence_axis(dim):
            if settings.max_seq_len is None:
                raise UserError(
                    f"input '{tensor.name}' has a dynamic sequence axis '{dim}' (axis {axis}): "
                    f"pass --max-seq-len N or --profile {tensor.name}:MIN,OPT,MAX (the signature records no max_length)"
                )
            lo.append(1)
            mid.append(min(TYPICAL_SEQ_LEN, settings.max_seq_len))
            hi.append(settings.max_seq_len)
        else:
            raise UserError(
                f"input '{tensor.name}' has a dynamic axis '{dim}' (axis {axis}) with no default range: "
                f"pass --profile {tensor.name}:MIN,OPT,MAX (shapes like 1x3x224x224)"
            )
    return ShapeRange(tuple(lo), tuple(mid), tuple(hi))


def _check_override(tensor: TensorSpec, r: ShapeRange, batch_axis: int | None) -> None:
    if len(r.min) != len(tensor.shape):
        raise UserError(
            f"--profile for '{tensor.name}' has rank {len(r.min)} but the signature's shape "
            f"{list(tensor.shape)} has rank {len(tensor.shape)}"
        )
    for axis, dim in enumerate(tensor.shape):
        if isinstance(dim, int) and axis != batch_axis and not (r.min[axis] == r.opt[axis] == r.max[axis] == dim):
            raise UserError(
                f"--profile for '{tensor.name}' changes fixed axis {axis} (size {dim}): "
                f"{list(r.min)} / {list(r.opt)} / {list(r.max)}"
            )


def derive_profiles(signature: Signature, settings: CompileSettings) -> tuple[Profile, ...]:
    """One profile per override in ``settings.profiles`` (at least one); unnamed inputs get the defaults."""
    if signature.batch_axis not in (None, 0):
        raise UserError(
            f"TensorRT in Triton batches on axis 0, but the signature's batch axis is {signature.batch_axis}; "
            "re-export with the batch axis first"
        )
    batch_axis = signature.batch_axis
    if batch_axis is not None and settings.max_batch_size == 0:
        # max_batch_size 0 (Triton does not batch): the batch axis stays in the engine with size 1.
        settings = replace(settings, max_batch_size=1)
    if settings.max_seq_len is None and signature_max_seq_len(signature) is not None:
        settings = replace(settings, max_seq_len=signature_max_seq_len(signature))
    inputs = {t.name: t for t in signature.inputs}
    overrides = settings.profiles or (Profile(),)
    profiles = []
    for index, override in enumerate(overrides):
        for name in override.names():
            if name not in inputs:
                known = ", ".join(inputs)
                raise UserError(f"--profile names '{name}', which is not an input of the model (inputs: {known})")
        profile = Profile()
        for tensor in signature.inputs:
            if tensor.name in override.names():
                r = override[tensor.name]
                _check_override(tensor, r, batch_axis)
            else:
                try:
                    r = _default_range(tensor, batch_axis, settings, signature_axis_ranges(signature))
                except UserError as exc:
                    if len(overrides) == 1:
                        raise
                    raise UserError(f"profile {index}: {exc}") from None
            profile = profile.add(tensor.name, r.min, r.opt, r.max)
        profiles.append(profile)
    return tuple(profiles)


def _parse_shape(text: str, where: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.strip().lower().split("x"))
    except ValueError:
        raise UserError(f"--profile {where}: '{text}' is not a shape like 1x3x224x224") from None
    if not dims or any(d < 1 for d in dims):
        raise UserError(f"--profile {where}: '{text}' needs sizes >= 1")
    return dims


def parse_profile_options(values: Sequence[str]) -> tuple[Profile, ...]:
    """Parse ``--profile`` values into profiles.

    Each value is ``NAME:MIN,OPT,MAX`` (shapes like ``1x8``), several joined with ``;``. Values add to the
    current profile until an input is named again, which starts the next profile:
    ``--profile ids:1x8,8x128,64x512 --profile mask:1x8,8x128,64x512 --profile ids:1x1,1x16,1x16`` is two
    profiles, the second overriding only ``ids``.
    """
    profiles: list[Profile] = []
    current = Profile()
    for value in values:
        for item in filter(None, (part.strip() for part in value.split(";"))):
            name, sep, shapes = item.rpartition(":")
            if not sep or not name:
                raise UserError(f"--profile '{item}': expected NAME:MIN,OPT,MAX, e.g. input_ids:1x8,8x128,64x512")
            parts = shapes.split(",")
            if len(parts) != 3:
                raise UserError(f"--profile '{item}': expected three shapes MIN,OPT,MAX separated by commas")
            lo, mid, hi = (_parse_shape(p, item) for p in parts)
            if name in current.names():
                profiles.append(current)
                current = Profile()
            try:
                current = current.add(name, lo, mid, hi)
            except UserError as exc:
                raise UserError(f"--profile '{item}': {exc}") from None
    if current.shapes:
        profiles.append(current)
    return tuple(profiles)


def format_shape(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape)
