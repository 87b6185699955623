"""A fast parser for the common subset of protobuf's text format, for validate's scan of ``config.pbtxt``.

Protobuf's ``text_format`` is pure Python and spends most of a config's parse on its tokenizer; a
1,000-model repository spent half of ``validate`` there (BENCHMARKS.md, "validate targets"). This module
lexes the whole text with one regular expression and fills the message directly.

It gives exactly ``text_format.Parse``'s message or nothing: every text it accepts, ``text_format``
accepts too, with the same result (``tests/validate/test_fast_config.py`` checks that on every config the
tests hold and on generated ones). Anything beyond the plain subset returns None, and the caller parses
with ``repo_builder.triton_config`` (the one reader), which gives the message or its own error, line and
column. Beyond the subset: string escapes, single quotes, adjacent strings, numbers other than plain
decimals (hex, octal, ``inf``, ``1.5f``), booleans other than ``true``/``false``, enum numbers,
``<...>`` messages, extensions, unknown fields, a field set twice that is not repeated, two members of a
oneof, a map key given twice, and every syntax error.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from repo_builder.triton_config import new_config

if TYPE_CHECKING:
    from google.protobuf.descriptor import FieldDescriptor

# protobuf's tokenizer's token classes (text_format.Tokenizer._TOKEN), so tokens end where its tokens end;
# whitespace and ``#`` comments as its _WHITESPACE_OR_COMMENT (they match the empty group). A string only
# when plain (no escape, closed on its line), quotes kept; any other character is a token of its own
# (``<``, ``'``, a ``"`` that opens no plain string) that no check below accepts.
_LEX = (
    r"\s+|#[^\n]*"
    r"|([A-Za-z_][0-9A-Za-z_+-]*"
    r"|(?:[0-9+-]|\.[0-9])[0-9A-Za-z_.+-]*"
    r'|"[^"\n\\]*"'
    r"|.)"
)
_FLOAT = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z"
_END = ""  # the token after the last


@cache
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)  # on first use: compiling at import would cost validate's start-up


# FieldDescriptor's type numbers (descriptor.proto's, fixed forever): importing the descriptor module here
# would cost validate's start-up ~5 ms.
_DOUBLE, _FLOAT_, _INT64, _UINT64, _INT32, _FIXED64, _FIXED32, _BOOL, _STRING, _BYTES = 1, 2, 3, 4, 5, 6, 7, 8, 9, 12
_UINT32, _ENUM, _SFIXED32, _SFIXED64, _SINT32, _SINT64 = 13, 14, 15, 16, 17, 18
_CPPTYPE_MESSAGE = 10
_RANGES = {
    _INT32: (-(1 << 31), 1 << 31),
    _SINT32: (-(1 << 31), 1 << 31),
    _SFIXED32: (-(1 << 31), 1 << 31),
    _INT64: (-(1 << 63), 1 << 63),
    _SINT64: (-(1 << 63), 1 << 63),
    _SFIXED64: (-(1 << 63), 1 << 63),
    _UINT32: (0, 1 << 32),
    _FIXED32: (0, 1 << 32),
    _UINT64: (0, 1 << 64),
    _FIXED64: (0, 1 << 64),
}


class _Outside(Exception):
    """The text leaves the subset (or is wrong): ``text_format`` decides."""


def _string(field: FieldDescriptor, token: str) -> Any:
    if token[:1] != '"' or len(token) < 2:
        raise _Outside
    return token[1:-1] if field.type == _STRING else token[1:-1].encode("utf-8")


def _enum(field: FieldDescriptor, token: str) -> Any:
    value = field.enum_type.values_by_name.get(token)
    if value is None:
        raise _Outside  # numbers and unknown names: text_format's call
    return value.number


def _integer(field: FieldDescriptor, token: str) -> Any:
    digits = token[1:] if token[:1] == "-" else token
    # Plain ASCII decimal only (int() also reads other scripts' digits; text_format does not).
    if not (digits.isascii() and digits.isdigit()) or (digits[0] == "0" and len(digits) > 1):
        raise _Outside
    number = int(token)
    low, high = _RANGES[field.type]
    if not low <= number < high:
        raise _Outside
    return number


def _bool(field: FieldDescriptor, token: str) -> Any:
    if token != "true" and token != "false":
        raise _Outside
    return token == "true"


def _float(field: FieldDescriptor, token: str) -> Any:
    if not _pattern(_FLOAT).match(token):
        raise _Outside
    return float(token)


_CONVERT = {
    _STRING: _string,
    _BYTES: _string,
    _ENUM: _enum,
    _BOOL: _bool,
    _FLOAT_: _float,
    _DOUBLE: _float,
    **dict.fromkeys(_RANGES, _integer),
}


class _Field(NamedTuple):
    descriptor: FieldDescriptor
    name: str
    repeated: bool
    message: bool
    map_entry: bool
    map_of_messages: bool
    oneof: str | None
    convert: Any  # the scalar's converter; None for messages (and for a type outside the subset)
    merge: Any  # _message_value or _scalar_value


@cache
def _table(message: Any) -> dict[str, _Field]:
    """Each field of a message type by name, as the parser needs it (once per type and process)."""
    table = {}
    for descriptor in message.fields:
        is_message = descriptor.cpp_type == _CPPTYPE_MESSAGE
        entry = is_message and descriptor.is_repeated and descriptor.message_type.GetOptions().map_entry
        oneof = descriptor.containing_oneof
        table[descriptor.name] = _Field(
            descriptor,
            descriptor.name,
            descriptor.is_repeated,
            is_message,
            entry,
            entry and descriptor.message_type.fields_by_name["value"].cpp_type == _CPPTYPE_MESSAGE,
            oneof.name if oneof is not None else None,
            None if is_message else _CONVERT.get(descriptor.type),
            _message_value if is_message else _scalar_value,
        )
    return table


def _fields(tokens: list[str], at: int, message: Any, end: str) -> int:
    """Fields from ``at`` up to and past ``end`` (``}``, or ``_END`` for the text's end); the next index."""
    table = _table(message.DESCRIPTOR)
    seen: set[str] = set()
    while True:
        token = tokens[at]
        if token == end:
            return at + 1 if end else at
        field = table.get(token)  # a proto field name is a plain identifier: no other token matches
        if field is None:
            raise _Outside
        at += 1
        if not field.repeated:
            if token in seen:
                raise _Outside  # text_format refuses some repeats and merges others
            seen.add(token)
        if field.oneof is not None and message.WhichOneof(field.oneof) not in (None, token):
            raise _Outside
        if tokens[at] == ":":
            at += 1
        elif not field.message:
            raise _Outside
        if field.repeated and tokens[at] == "[":
            at = _listed(tokens, at + 1, message, field)
        else:
            at = field.merge(tokens, at, message, field)
        if tokens[at] == "," or tokens[at] == ";":  # one optional separator, as in text_format
            at += 1


def _listed(tokens: list[str], at: int, message: Any, field: _Field) -> int:
    """``[a, b]`` after its ``[``: no trailing comma, as in text_format."""
    if tokens[at] == "]":
        return at + 1
    while True:
        at = field.merge(tokens, at, message, field)
        token = tokens[at]
        if token == "]":
            return at + 1
        if token != ",":
            raise _Outside
        at += 1


def _scalar_value(tokens: list[str], at: int, message: Any, field: _Field) -> int:
    if field.convert is None:
        raise _Outside  # groups: not in Triton's proto
    value = field.convert(field.descriptor, tokens[at])
    if tokens[at + 1][:1] == '"':
        raise _Outside  # adjacent strings concatenate in text_format
    if field.repeated:
        getattr(message, field.name).append(value)
    else:
        setattr(message, field.name, value)
    return at + 1


def _message_value(tokens: list[str], at: int, message: Any, field: _Field) -> int:
    if tokens[at] != "{":
        raise _Outside
    at += 1
    if not field.repeated:
        sub = getattr(message, field.name)
        sub.SetInParent()
        return _fields(tokens, at, sub, "}")
    container = getattr(message, field.name)
    if not field.map_entry:
        return _fields(tokens, at, container.add(), "}")
    entry = container.GetEntryClass()()
    at = _fields(tokens, at, entry, "}")
    if entry.key in container:
        raise _Outside  # a key given twice
    if field.map_of_messages:  # as text_format stores a map entry
        container[entry.key].CopyFrom(entry.value)
    else:
        container[entry.key] = entry.value
    return at


def parse_common_config(text: str) -> Any | None:
    """The ``ModelConfig`` of ``text`` when it lies in the plain subset (then exactly what
    ``text_format.Parse`` gives), else None: parse it with ``repo_builder.triton_config``."""
    tokens = [t for t in _pattern(_LEX).findall(text) if t]
    tokens.append(_END)
    config = new_config()
    try:
        _fields(tokens, 0, config, _END)
    except (_Outside, IndexError, ValueError, TypeError, RecursionError):
        return None
    return config
