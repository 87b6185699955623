"""What bench sent: each input of the first request described for its record and its text output.

A figure means little without the request behind it: a synthesized text of 23 characters and a 8 x 8 PNG
cost a model far less than a page of text or a photo. Each input is named with where it came from
(``--input`` file or synthesized), its shape and type, and for bytes what they hold: the text and its
length, or an image's format and size (read from its header; no imaging library).
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Mapping
from typing import Any

TEXT_SHOWN = 200  # characters of a text kept in the record (its full length is recorded beside it)


def image_size(data: bytes) -> tuple[str, int, int] | None:
    """``(format, width, height)`` of a PNG or JPEG from its header; None for anything else."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24 and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return "PNG", width, height
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[str, int, int] | None:
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length: start of image, TEM, restart markers
            at += 2
            continue
        length = struct.unpack(">H", data[at + 2:at + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame: height, then width
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return "JPEG", width, height
        at += 2 + length
    return None


def _bytes_value(value: Any) -> dict[str, Any]:
    data = value if isinstance(value, bytes) else str(value).encode()
    found = image_size(data)
    if found is not None:
        kind, width, height = found
        return {"image": {"format": kind, "width": width, "height": height, "bytes": len(data)}}
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"bytes": len(data)}
    return {"text": text[:TEXT_SHOWN], "length": len(text), "bytes": len(data)}


def describe_input(name: str, array: Any, wire: str, source: str) -> dict[str, Any]:
    """One input of a request: ``{"name", "source", "datatype", "shape"}`` plus what its bytes hold."""
    entry: dict[str, Any] = {"name": name, "source": source, "datatype": wire, "shape": [int(d) for d in array.shape]}
    if wire == "BYTES" and array.size:
        entry.update(_bytes_value(array.flat[0]))
    elif wire == "UINT8" and array.ndim >= 1 and array.size:
        row = array if array.ndim == 1 else array.reshape(-1, array.shape[-1])[0]
        found = image_size(bytes(row.tobytes()))
        if found is not None:
            kind, width, height = found
            entry["image"] = {"format": kind, "width": width, "height": height, "bytes": int(row.size)}
    return entry


def describe_payload(payload: Mapping[str, tuple[Any, str]], given: Collection[str], default: str = "synthesized") -> list[dict[str, Any]]:
    """Every input of one request; ``given``: the names whose bytes came from ``--input`` files, the others
    are ``default`` (synthesized, or the family's reference inputs)."""
    return [describe_input(name, array, wire, "file" if name in given else default) for name, (array, wire) in payload.items()]


def format_inputs(inputs: list[dict[str, Any]]) -> str:
    """One line for a person: what each input carried."""
    parts = []
    for entry in inputs:
        what = f"{entry['datatype']} {entry['shape']}"
        if "image" in entry:
            image = entry["image"]
            what = f"{image['format']} image {image['width']}x{image['height']} ({image['bytes']} bytes)"
        elif "text" in entry:
            shown = entry["text"] if len(entry["text"]) <= 60 else entry["text"][:57] + "..."
            what = f"text {shown!r} ({entry['length']} characters)"
        parts.append(f"{entry['name']} ({entry['source']}): {what}")
    return "inputs: " + "; ".join(parts)
