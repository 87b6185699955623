"""Names of proto enum values that never raise: ``model_config.proto`` is proto3, so its enums are open.

Triton's C++ text parser accepts any number for an open enum field (``data_type: 99``), and so does
protobuf's Python parser; ``DataType.Name(99)`` then raises ``ValueError``. Triton itself never names such a
value: core's ``ValidateIOShape`` refuses only ``TYPE_INVALID`` (0), and common's
``DataTypeToProtocolString`` prints ``<invalid>`` for any other number it does not know, so the model loads
and every request naming the tensor fails ("inference input 'X' data-type is 'FP32', but model 'M' expects
'<invalid>'", core ``infer_request.cc``).
"""

from __future__ import annotations

from typing import Any

INVALID_PROTOCOL_NAME = "<invalid>"  # triton::common::DataTypeToProtocolString's default


def enum_name(enum: Any, number: int) -> str:
    """``enum``'s name for ``number`` (an EnumTypeWrapper or an EnumDescriptor), or ``<unknown N>``."""
    descriptor = getattr(enum, "DESCRIPTOR", enum)
    value = descriptor.values_by_number.get(number)
    return value.name if value is not None else f"<unknown {number}>"


def is_named(enum: Any, number: int) -> bool:
    """Whether the proto names ``number``."""
    return number in getattr(enum, "DESCRIPTOR", enum).values_by_number
